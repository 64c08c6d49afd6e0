//! One chat interface over OpenAI-compatible, Anthropic and Gemini wire formats, with retries and a replay provider.
