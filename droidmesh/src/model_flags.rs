//! `droidmesh run`'s model flags: which server and model the embedded mesh's agents use, and
//! how their calls are bounded and retried. Flags win over the `[llm]` config, which wins over
//! the built-in defaults; what `--llm-url` keeps of the config is said in its help.
use std::time::Duration;

use anyhow::{Result, bail};
use droidmesh_llm::{DEFAULT_PROFILE, LlmConfig, ProfileConfig, ProviderConfig, WireFormat};

/// The name of the provider `--llm-url` configures (cassettes recorded with it say so).
pub const URL_PROVIDER: &str = "cli";

#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "Model (the embedded mesh's agents; flags win over [llm] config)")]
pub struct ModelArgs {
    /// Model name for every agent (e.g. gpt-4o, qwen2.5:7b). Replaces each profile's model;
    /// without --llm-url every profile then uses the provider of the config's `default` profile.
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// Base URL of an OpenAI-compatible server for every agent (Ollama:
    /// http://localhost:11434/v1; llama.cpp: http://127.0.0.1:8080/v1). Needs --model. Kept from
    /// the config: the timeout, call_timeout and retry of the provider the `default` profile
    /// uses, and, when that provider speaks the openai wire, its headers and api_key_env (dropped
    /// when that variable is unset); each profile's temperature, max_tokens, context_tokens and
    /// history_tokens. The key is read from that api_key_env, else from OPENAI_API_KEY when set.
    #[arg(long, value_name = "URL")]
    pub llm_url: Option<String>,
    /// Deadline of one attempt of a model call, e.g. 90s or 5m. Wins over the `timeout` of
    /// every provider the agents use [config, else 60s]
    #[arg(long, value_name = "DURATION", value_parser = positive_duration)]
    pub llm_timeout: Option<Duration>,
    /// Deadline of a whole model call, every attempt and the waits between them included; at
    /// least the attempt deadline. Wins over `call_timeout` [config, else 5m]
    #[arg(long, value_name = "DURATION", value_parser = positive_duration)]
    pub llm_call_timeout: Option<Duration>,
    /// Attempts per model call, the first included (1 to 10; 1 = no retry). Wins over
    /// `retry.max_attempts` [config, else 3]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=10))]
    pub llm_attempts: Option<u32>,
    /// Also retry an attempt that ran past --llm-timeout (true or false; the bare flag means
    /// true). Off by default: a local server is still working on the abandoned request, so the
    /// retry would only queue behind it. Wins over `retry.on_timeout` [config, else false]
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub llm_retry_on_timeout: Option<bool>,
    /// Most tokens a reply may have, for every agent; always sent. Wins over each profile's
    /// `max_tokens` [config, else 4096 capped at a quarter of the context]
    #[arg(long, value_name = "TOKENS", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_tokens: Option<u32>,
    /// The model's context window in tokens (a llama.cpp server's -c), for every agent. Wins
    /// over each profile's `context_tokens` [config, else unknown]
    #[arg(long, value_name = "TOKENS", value_parser = clap::value_parser!(u32).range(1..))]
    pub context_tokens: Option<u32>,
}

/// The ids of every flag here, for clap's `conflicts_with_all`.
pub const FLAG_IDS: [&str; 8] = [
    "model",
    "llm_url",
    "llm_timeout",
    "llm_call_timeout",
    "llm_attempts",
    "llm_retry_on_timeout",
    "max_tokens",
    "context_tokens",
];

fn positive_duration(text: &str) -> Result<Duration, String> {
    match humantime::parse_duration(text.trim()) {
        Ok(d) if d.is_zero() => {
            Err("expected a positive duration such as 90s or 5m, found 0".into())
        }
        Ok(d) => Ok(d),
        Err(e) => Err(format!(
            "expected a duration such as 90s or 5m, found `{text}` ({e})"
        )),
    }
}

impl ModelArgs {
    fn call_flags(&self) -> Vec<&'static str> {
        [
            ("--llm-timeout", self.llm_timeout.is_some()),
            ("--llm-call-timeout", self.llm_call_timeout.is_some()),
            ("--llm-attempts", self.llm_attempts.is_some()),
            (
                "--llm-retry-on-timeout",
                self.llm_retry_on_timeout.is_some(),
            ),
            ("--max-tokens", self.max_tokens.is_some()),
            ("--context-tokens", self.context_tokens.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, set)| set.then_some(name))
        .collect()
    }

    /// Applies the flags to the embedded mesh's `[llm]` config (`llm`; `None` = no section).
    /// `key_set(var)` says whether an environment variable holds a key. Returns whether
    /// --llm-url or --model configured the model. Every refusal happens here, before anything
    /// starts.
    pub fn apply(
        &self,
        remote_gateway: bool,
        llm: &mut Option<LlmConfig>,
        key_set: &dyn Fn(&str) -> bool,
    ) -> Result<bool> {
        let call_flags = self.call_flags();
        let model_flags = self.llm_url.is_some() || self.model.is_some();
        if !model_flags && call_flags.is_empty() {
            return Ok(false);
        }
        if remote_gateway {
            bail!(
                "the model flags configure the embedded mesh; a remote gateway's agents use their own [llm] config"
            );
        }
        if model_flags {
            let mut config = llm.take().unwrap_or_default();
            self.point_at_model(&mut config, key_set)?;
            *llm = Some(config);
        }
        if !call_flags.is_empty() {
            if llm.is_none() && key_set("OPENAI_API_KEY") {
                *llm = Some(LlmConfig::defaults());
            }
            let Some(config) = llm.as_mut() else {
                bail!(
                    "{} apply to a live model, and none is configured: pass --llm-url and --model, set OPENAI_API_KEY, or configure [llm]",
                    call_flags.join(", ")
                );
            };
            self.bound_calls(config, &call_flags)?;
        }
        if let Some(config) = llm.as_ref()
            && let Err(problems) = config.validate()
        {
            bail!(
                "the model flags make the [llm] config unusable: {}",
                problems.join("; ")
            );
        }
        Ok(model_flags)
    }

    /// --llm-url and --model: every profile talks to that server and model.
    fn point_at_model(&self, config: &mut LlmConfig, key_set: &dyn Fn(&str) -> bool) -> Result<()> {
        let model = match &self.model {
            Some(m) if !m.trim().is_empty() => m.trim().to_owned(),
            _ => bail!("--llm-url needs --model NAME (the model the server should run)"),
        };
        let default_provider = config
            .profile(DEFAULT_PROFILE)
            .map(|(_, p)| p.provider.clone())
            .unwrap_or_else(|| "openai".into());
        let provider = match &self.llm_url {
            Some(url) => {
                let mut p = ProviderConfig::new(URL_PROVIDER, WireFormat::Openai, url.trim());
                if let Some(base) = config.providers.get(&default_provider) {
                    p.timeout = base.timeout;
                    p.call_timeout = base.call_timeout;
                    p.retry = base.retry.clone();
                    if base.wire == WireFormat::Openai {
                        p.headers = base.headers.clone();
                        p.api_key_env = base.api_key_env.clone().filter(|var| key_set(var));
                    }
                }
                if p.api_key_env.is_none() && key_set("OPENAI_API_KEY") {
                    p = p.with_api_key_env("OPENAI_API_KEY");
                }
                config.providers.insert(URL_PROVIDER.into(), p);
                URL_PROVIDER.to_owned()
            }
            None => default_provider,
        };
        config
            .profiles
            .entry(DEFAULT_PROFILE.to_owned())
            .or_insert_with(|| ProfileConfig::new(&provider, &model));
        for profile in config.profiles.values_mut() {
            profile.provider.clone_from(&provider);
            profile.model.clone_from(&model);
        }
        Ok(())
    }

    /// The deadline, retry and token flags, on every live provider and profile the agents use.
    fn bound_calls(&self, config: &mut LlmConfig, flags: &[&str]) -> Result<()> {
        let used: std::collections::BTreeSet<String> = config
            .profiles
            .values()
            .map(|p| p.provider.clone())
            .collect();
        let mut live = 0;
        for (name, p) in &mut config.providers {
            if !used.contains(name) || p.wire == WireFormat::Replay {
                continue;
            }
            live += 1;
            if let Some(t) = self.llm_timeout {
                p.timeout = t;
            }
            if let Some(t) = self.llm_call_timeout {
                p.call_timeout = t;
            }
            if let Some(n) = self.llm_attempts {
                p.retry.max_attempts = n;
            }
            if let Some(on) = self.llm_retry_on_timeout {
                p.retry.on_timeout = on;
            }
            if p.call_timeout < p.timeout {
                let (attempt, call) = (fmt(p.timeout), fmt(p.call_timeout));
                match (self.llm_timeout, self.llm_call_timeout) {
                    (Some(_), Some(_)) => bail!(
                        "--llm-call-timeout {call} is shorter than --llm-timeout {attempt}; the whole call must allow at least one attempt"
                    ),
                    (Some(_), None) => bail!(
                        "--llm-timeout {attempt} is longer than provider `{name}`'s whole-call deadline of {call} (config or default); raise that with --llm-call-timeout"
                    ),
                    _ => bail!(
                        "--llm-call-timeout {call} is shorter than provider `{name}`'s attempt deadline of {attempt} (config or default); lower that with --llm-timeout"
                    ),
                }
            }
        }
        if live == 0 {
            bail!(
                "{} apply to a live model, and every profile uses a replay provider",
                flags.join(", ")
            );
        }
        for profile in config.profiles.values_mut() {
            if let Some(n) = self.max_tokens {
                profile.max_tokens = Some(n);
            }
            if let Some(n) = self.context_tokens {
                profile.context_tokens = Some(n);
            }
        }
        Ok(())
    }
}

fn fmt(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        model: ModelArgs,
    }

    fn flags(args: &[&str]) -> ModelArgs {
        Cli::try_parse_from(std::iter::once("run").chain(args.iter().copied()))
            .unwrap()
            .model
    }

    /// A file config: `default` uses a local llama.cpp provider with its own deadlines,
    /// retries, header and key variable; codeact has sampling and token settings.
    fn file_config() -> LlmConfig {
        LlmConfig::from_toml_str(
            r#"
            [providers.local]
            wire = "openai"
            base_url = "http://gpu-box:8080/v1"
            api_key_env = "LOCAL_KEY"
            headers = { X-Org = "lab" }
            timeout = "3m"
            call_timeout = "10m"
            retry = { max_attempts = 1, initial_backoff = "1s", max_backoff = "5s" }

            [profiles.default]
            provider = "local"
            model = "old-model"

            [profiles.codeact]
            provider = "local"
            model = "old-model"
            temperature = 0.1
            max_tokens = 500
            context_tokens = 8192
            "#,
        )
        .unwrap()
    }

    fn apply(args: &[&str], llm: Option<LlmConfig>, keys: &[&str]) -> Result<LlmConfig> {
        let mut llm = llm;
        flags(args).apply(false, &mut llm, &|var| keys.contains(&var))?;
        Ok(llm.unwrap())
    }

    #[test]
    fn llm_url_keeps_what_the_config_says_about_calls_and_profiles() {
        let c = apply(
            &["--llm-url", "http://127.0.0.1:8080/v1", "--model", "gemma"],
            Some(file_config()),
            &["LOCAL_KEY"],
        )
        .unwrap();
        let p = &c.providers[URL_PROVIDER];
        assert_eq!(p.base_url, "http://127.0.0.1:8080/v1");
        assert_eq!(
            (p.timeout, p.call_timeout),
            (Duration::from_secs(180), Duration::from_secs(600))
        );
        assert_eq!(p.retry.max_attempts, 1);
        assert_eq!(p.headers.get("X-Org").map(String::as_str), Some("lab"));
        assert_eq!(p.api_key_env.as_deref(), Some("LOCAL_KEY"));
        let codeact = &c.profiles["codeact"];
        assert_eq!(
            (codeact.provider.as_str(), codeact.model.as_str()),
            (URL_PROVIDER, "gemma")
        );
        assert_eq!(
            (
                codeact.temperature,
                codeact.max_tokens,
                codeact.context_tokens
            ),
            (Some(0.1), Some(500), Some(8192))
        );
        assert_eq!(c.profiles["default"].model, "gemma");
    }

    #[test]
    fn the_key_is_the_configured_variable_when_set_else_openai_api_key() {
        let url = ["--llm-url", "http://h/v1", "--model", "m"];
        let c = apply(&url, Some(file_config()), &["OPENAI_API_KEY"]).unwrap();
        assert_eq!(
            c.providers[URL_PROVIDER].api_key_env.as_deref(),
            Some("OPENAI_API_KEY")
        );
        let c = apply(&url, Some(file_config()), &[]).unwrap();
        assert_eq!(
            c.providers[URL_PROVIDER].api_key_env, None,
            "no key for a local server"
        );
        // No [llm] at all: the built-in default provider (OpenAI) lends its defaults.
        let c = apply(&url, None, &[]).unwrap();
        let p = &c.providers[URL_PROVIDER];
        assert_eq!(
            (p.timeout, p.retry.max_attempts, p.api_key_env.clone()),
            (Duration::from_secs(60), 3, None)
        );
        // A default provider of another wire lends its deadlines, not its headers or key.
        let mut anthropic = file_config();
        anthropic.profiles.get_mut("default").unwrap().provider = "anthropic".into();
        anthropic.providers.get_mut("anthropic").unwrap().timeout = Duration::from_secs(120);
        let c = apply(&url, Some(anthropic), &["ANTHROPIC_API_KEY"]).unwrap();
        let p = &c.providers[URL_PROVIDER];
        assert_eq!(
            (p.timeout, p.api_key_env.clone()),
            (Duration::from_secs(120), None)
        );
        assert!(p.headers.is_empty());
    }

    #[test]
    fn call_flags_win_over_the_config() {
        let c = apply(
            &[
                "--llm-url",
                "http://h/v1",
                "--model",
                "m",
                "--llm-timeout",
                "90s",
                "--llm-call-timeout",
                "20m",
                "--llm-attempts",
                "4",
                "--llm-retry-on-timeout",
                "--max-tokens",
                "256",
                "--context-tokens",
                "4096",
            ],
            Some(file_config()),
            &[],
        )
        .unwrap();
        let p = &c.providers[URL_PROVIDER];
        assert_eq!(
            (p.timeout, p.call_timeout),
            (Duration::from_secs(90), Duration::from_secs(1200))
        );
        assert_eq!((p.retry.max_attempts, p.retry.on_timeout), (4, true));
        for profile in c.profiles.values() {
            assert_eq!(
                (profile.max_tokens, profile.context_tokens),
                (Some(256), Some(4096))
            );
        }
        // Without --llm-url they apply to the providers the config's profiles use.
        let c = apply(
            &["--llm-attempts", "2", "--llm-retry-on-timeout=false"],
            Some(file_config()),
            &[],
        )
        .unwrap();
        assert_eq!(c.providers["local"].retry.max_attempts, 2);
        assert!(!c.providers["local"].retry.on_timeout);
        assert_eq!(
            c.providers["openai"].retry.max_attempts, 3,
            "an unused provider is left alone"
        );
    }

    #[test]
    fn bad_values_are_refused_before_anything_starts() {
        let err =
            |args: &[&str], llm: Option<LlmConfig>| apply(args, llm, &[]).unwrap_err().to_string();
        assert!(
            err(&["--llm-timeout", "11m"], Some(file_config())).contains(
                "--llm-timeout 11m is longer than provider `local`'s whole-call deadline of 10m"
            ),
        );
        assert!(
            err(&["--llm-timeout", "11m"], Some(file_config()))
                .contains("raise that with --llm-call-timeout")
        );
        assert!(
            err(&["--llm-call-timeout", "1m"], Some(file_config()))
                .contains("lower that with --llm-timeout")
        );
        assert!(
            err(
                &["--llm-timeout", "2m", "--llm-call-timeout", "1m"],
                Some(file_config())
            )
            .contains("--llm-call-timeout 1m is shorter than --llm-timeout 2m")
        );
        assert!(err(&["--llm-attempts", "2"], None).contains("none is configured"));
        assert!(
            err(
                &["--max-tokens", "9000", "--context-tokens", "8192"],
                Some(file_config())
            )
            .contains("max_tokens: expected less than context_tokens (8192)")
        );
        assert!(err(&["--llm-url", "http://h/v1"], None).contains("--llm-url needs --model"));
        let mut llm = Some(file_config());
        let remote = flags(&["--llm-attempts", "2"]).apply(true, &mut llm, &|_| false);
        assert!(remote.unwrap_err().to_string().contains("remote gateway"));
        for bad in [
            ["--llm-timeout", "0s"],
            ["--llm-timeout", "soon"],
            ["--llm-attempts", "11"],
            ["--max-tokens", "0"],
        ] {
            let e = Cli::try_parse_from(std::iter::once("run").chain(bad))
                .unwrap_err()
                .to_string();
            assert!(e.contains(bad[0]), "{e}");
        }
        // With OPENAI_API_KEY and no [llm], the flags bound the built-in OpenAI provider.
        let c = apply(&["--llm-timeout", "2m"], None, &["OPENAI_API_KEY"]).unwrap();
        assert_eq!(c.providers["openai"].timeout, Duration::from_secs(120));
    }
}
