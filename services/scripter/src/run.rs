//! One scripter run: per step, render the prompts with the earlier steps, ask the model, run
//! the JavaScript it wrote in the run's session (variables persist), and stream what happened.
//! A reply without code is the final answer. The run also ends at the step budget, after too
//! many failed steps in a row, when the model cannot be used, or when the caller goes away (then
//! nothing is left running: the session is dropped and requests in flight are cancelled).
use std::sync::Arc;
use std::time::Duration;

use droidmesh_agent::parse::{
    CodeChoice, EchoText, IgnoredWhy, PromptEcho, choose_code, final_message,
};
use droidmesh_agent::prompts::{CodeActStep, PromptSet, ScripterUser};
use droidmesh_llm::{CallTags, ChatRequest, ChatTarget, LlmClient, Message};
use droidmesh_proto::v1::{
    AgentEvent, CodeBlock, Observation, RunScriptRequest, StepStarted, Thought, TokenUsage,
    UsageReport, agent_event,
};
use droidmesh_sandbox::{RunOutcome, Session};
use tokio::sync::{OwnedSemaphorePermit, mpsc, watch};
use tonic::Status;

use crate::config::ScripterConfig;
use crate::functions::RunCtx;
use crate::result;

pub(crate) const AGENT: &str = "scripter";

/// Largest output (console and completion value) shown per step, in bytes.
const OUTPUT_MAX: usize = 16 * 1024;

/// Fence languages that are code the model meant to run, not data quoted in an answer.
const OTHER_LANGUAGES: &[&str] = &[
    "python",
    "py",
    "python3",
    "bash",
    "sh",
    "shell",
    "zsh",
    "ruby",
    "rb",
    "go",
    "rust",
    "java",
    "kotlin",
    "c",
    "cpp",
    "c++",
    "csharp",
    "cs",
    "php",
    "perl",
    "powershell",
    "ps1",
];

/// How a run ended.
pub(crate) struct Outcome {
    pub success: bool,
    pub answer: String,
    pub steps: u32,
}

/// Everything one run holds; dropping it stops the run's JavaScript and HTTP.
pub(crate) struct Run {
    pub cfg: Arc<ScripterConfig>,
    pub llm: LlmClient,
    pub prompts: Arc<PromptSet>,
    pub req: RunScriptRequest,
    pub target: ChatTarget,
    pub max_steps: u32,
    /// The rendered system prompt.
    pub system: String,
    pub session: Session,
    pub ctx: Arc<RunCtx>,
    pub events: mpsc::Sender<Result<AgentEvent, Status>>,
    /// Dropped with the run: cancels HTTP requests still in flight.
    pub cancel: watch::Sender<bool>,
    /// The run's slot in the service's limit of concurrent runs, freed with the run.
    pub _permit: OwnedSemaphorePermit,
    pub started: std::time::Instant,
    /// This replica's name, in the locations of the files the run reports.
    pub replica: Arc<str>,
    /// Said first when the files of the task's earlier scripts are on another replica.
    pub lost: Option<String>,
}

impl Run {
    async fn emit(&self, kind: agent_event::Kind) -> bool {
        self.events
            .send(Ok(AgentEvent { kind: Some(kind) }))
            .await
            .is_ok()
    }

    /// Runs the steps and sends `AgentFinished`. Returns early when the caller went away.
    pub async fn run(self) {
        let mut usage = TokenUsage::default();
        if let Some(lost) = &self.lost {
            let said = agent_event::Kind::Thought(Thought {
                agent: AGENT.into(),
                text: lost.clone(),
            });
            if !self.emit(said).await {
                return;
            }
        }
        let outcome = self.steps(&mut usage).await;
        // Nothing runs past this point: requests in flight stop now.
        let _ = self.cancel.send(true);
        let Some(outcome) = outcome else {
            tracing::info!("the caller went away; run stopped");
            return;
        };
        tracing::info!(
            success = outcome.success,
            steps = outcome.steps,
            "scripter run finished"
        );
        let finished = result::finished(&self, outcome, usage).await;
        let _ = self.emit(agent_event::Kind::Finished(finished)).await;
    }

    /// `None` when the caller went away.
    async fn steps(&self, usage: &mut TokenUsage) -> Option<Outcome> {
        let fail = |steps, answer: String| {
            Some(Outcome {
                success: false,
                answer,
                steps,
            })
        };
        let mut history: Vec<CodeActStep> = Vec::new();
        let mut omitted = 0u32;
        let mut failures = 0u32;
        let mut last_error = String::new();
        for step in 1..=self.max_steps {
            let started = agent_event::Kind::Step(StepStarted {
                agent: AGENT.into(),
                step,
            });
            if !self.emit(started).await {
                return None;
            }
            let user = ScripterUser {
                step,
                max_steps: self.max_steps,
                omitted_steps: omitted,
                history: history.clone(),
            };
            let user = match self.prompts.render(&user) {
                Ok(u) => u,
                Err(e) => {
                    return fail(
                        step,
                        format!("the scripter step prompt does not render: {e}"),
                    );
                }
            };
            let request = ChatRequest::new(vec![
                Message::system(self.system.clone()),
                Message::user(user.clone()),
            ])
            .tagged(CallTags::new(self.req.task_id.as_str()).step(step));
            let reply = tokio::select! {
                r = self.llm.chat(self.target.clone(), request) => r,
                () = self.events.closed() => return None,
            };
            let mut record = CodeActStep {
                step,
                ..CodeActStep::default()
            };
            match reply {
                Err(e) if e.is_unusable() => {
                    return fail(step, format!("the model cannot be used: {e}"));
                }
                Err(e) => record.error = Some(format!("the model call failed: {e}")),
                Ok(r) => {
                    add_usage(usage, &r.usage);
                    if !self.emit(agent_event::Kind::Usage(usage_report(&r))).await {
                        return None;
                    }
                    // Only code the model wrote for this step runs: not code it copied back
                    // from the prompt (a copied example could call out to the network).
                    let own = history.iter();
                    let echo = PromptEcho::of([
                        EchoText::shared(&self.system),
                        std::sync::Arc::new(EchoText::new(user.as_str())),
                    ])
                    .with_own_words(own.flat_map(|s| [s.thought.as_str(), s.code.as_str()]));
                    let choice = choose_code(&r.text, &echo);
                    // Only what the model wrote itself goes into its history: a copied
                    // heading kept as its thought would be its own words next step.
                    record.thought = choice.own_prose.clone();
                    record.notice = choice.summary();
                    match choice.code.clone() {
                        None => match not_an_answer(&choice) {
                            Some(why) => record.error = Some(why),
                            None => return Some(final_outcome(&choice.prose, step)),
                        },
                        Some(code) => match self.run_code(&choice.prose, code, &mut record).await {
                            Ran::Done => {}
                            Ran::Gone => return None,
                            Ran::Broken(why) => return fail(step, why),
                        },
                    }
                }
            }
            let notes = record.notice.iter().cloned().collect();
            if !self
                .observe(record.output.clone(), record.error.clone(), notes)
                .await
            {
                return None;
            }
            match &record.error {
                Some(e) => {
                    failures += 1;
                    last_error.clone_from(e);
                }
                None => failures = 0,
            }
            push(&mut history, &mut omitted, record, self.cfg.history_steps);
            if failures >= self.cfg.max_consecutive_failures {
                return fail(
                    step,
                    format!("{failures} steps in a row failed; the last: {last_error}"),
                );
            }
        }
        let last = history
            .last()
            .map(|s| match &s.error {
                Some(e) => format!("; the last step failed: {}", excerpt(e, 300)),
                None if !s.output.is_empty() => {
                    format!("; the last step printed: {}", excerpt(&s.output, 300))
                }
                None => String::new(),
            })
            .unwrap_or_default();
        fail(
            self.max_steps,
            format!(
                "the step limit ({}) was reached before the task was finished{last}",
                self.max_steps
            ),
        )
    }

    /// Streams the thought and the code, runs the code, and records what it printed.
    async fn run_code(&self, prose: &str, code: String, record: &mut CodeActStep) -> Ran {
        if !prose.is_empty() {
            let thought = Thought {
                agent: AGENT.into(),
                text: prose.to_owned(),
            };
            if !self.emit(agent_event::Kind::Thought(thought)).await {
                return Ran::Gone;
            }
        }
        record.code.clone_from(&code);
        let block = CodeBlock {
            agent: AGENT.into(),
            language: "javascript".into(),
            code: code.clone(),
        };
        if !self.emit(agent_event::Kind::Code(block)).await {
            return Ran::Gone;
        }
        let step_limit = Duration::from_millis(self.cfg.step_timeout_ms);
        self.ctx
            .set_step_deadline(tokio::time::Instant::now() + step_limit);
        let ran = tokio::select! {
            o = self.session.run(code) => o,
            () = self.events.closed() => return Ran::Gone,
        };
        match ran {
            Ok(out) => {
                let (output, error) = describe(&out);
                record.output = output;
                record.error = error;
                Ran::Done
            }
            Err(e) => Ran::Broken(format!("the javascript sandbox stopped working: {e}")),
        }
    }

    async fn observe(&self, output: String, error: Option<String>, notes: Vec<String>) -> bool {
        let obs = Observation {
            agent: AGENT.into(),
            output,
            error,
            notes,
        };
        self.emit(agent_event::Kind::Observation(obs)).await
    }
}

/// How running a step's code went.
enum Ran {
    Done,
    /// The caller went away.
    Gone,
    /// The sandbox itself failed; the run cannot go on.
    Broken(String),
}

/// Why a reply without JavaScript of the model's own is not a final answer either, if it is
/// not.
fn not_an_answer(choice: &CodeChoice) -> Option<String> {
    let copied = choice.copied();
    if copied > 0 {
        return Some(format!(
            "nothing ran: the code in the reply was copied from this prompt ({copied} block{}): write one ```js block of your own, or the final answer without any code block",
            if copied == 1 { "" } else { "s" }
        ));
    }
    let other = choice.ignored.iter().find_map(|b| match &b.why {
        IgnoredWhy::NotJavaScript(l)
            if OTHER_LANGUAGES.contains(&l.to_ascii_lowercase().as_str()) =>
        {
            Some(l)
        }
        _ => None,
    });
    if let Some(lang) = other {
        return Some(format!(
            "only JavaScript runs here, and the reply held a {lang} block: write the step as one ```js block, or answer without any code block when the task is done"
        ));
    }
    if choice.prose.trim().is_empty() {
        return Some(
            "the reply was empty: write one ```js block, or the final answer without a code block"
                .into(),
        );
    }
    None
}

/// The final answer: success unless it starts with `FAILED:` (or `ERROR:`, `FAILURE:`).
fn final_outcome(prose: &str, step: u32) -> Outcome {
    let f = final_message(prose);
    let answer = if f.message.is_empty() {
        "the scripter reported a failure without saying why".to_owned()
    } else {
        f.message
    };
    Outcome {
        success: f.success,
        answer,
        steps: step,
    }
}

/// Appends a step, keeping at most `keep` (older ones are counted in `omitted`).
fn push(history: &mut Vec<CodeActStep>, omitted: &mut u32, step: CodeActStep, keep: usize) {
    history.push(step);
    while history.len() > keep {
        history.remove(0);
        *omitted += 1;
    }
}

fn add_usage(total: &mut TokenUsage, u: &droidmesh_llm::Usage) {
    total.input_tokens += u.input_tokens;
    total.output_tokens += u.output_tokens;
    total.cached_input_tokens += u.cached_input_tokens.unwrap_or(0);
    total.calls += 1;
}

fn usage_report(r: &droidmesh_llm::ChatResponse) -> UsageReport {
    r.usage_report(AGENT)
}

/// What a run printed (console, then `=> value`), capped, and its error in words.
fn describe(out: &RunOutcome) -> (String, Option<String>) {
    let mut output = out.console.trim_end_matches('\n').to_owned();
    if let Some(v) = &out.value {
        if !output.is_empty() && !output.ends_with('\n') {
            output.push('\n');
        }
        output.push_str("=> ");
        output.push_str(&v.to_string());
    }
    let error = out.error.as_ref().map(|e| match e.line {
        Some(line) => format!("{} error at line {line}: {}", e.kind, e.message),
        None => format!("{} error: {}", e.kind, e.message),
    });
    (excerpt(&output, OUTPUT_MAX), error)
}

/// `text` cut to at most `max` bytes (on a character boundary), saying how much was cut.
pub(crate) fn excerpt(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}… [{} more bytes not shown]",
        &text[..end],
        text.len() - end
    )
}
