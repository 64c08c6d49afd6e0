//! A JavaScript sandbox (QuickJS) with per-session capabilities and time, memory and stack limits.
