//! What the agents share: the tool registry, prompt templates and parsers for model output.
