//! What an eval run found: one record per task instance, the table printed at the end, and
//! the JSON and JUnit files (the JSON holds everything needed to reproduce and compare a run:
//! each instance's template, seed, parameters and goal, and what its check read).
use std::time::Duration;

use droidmesh_eval::{Finding, Instance, stats};
use serde::Serialize;

/// One task instance's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct TaskRecord {
    pub id: String,
    pub template: String,
    pub seed: u64,
    pub params: droidmesh_eval::params::Values,
    pub goal: String,
    pub success: bool,
    pub score: f64,
    /// What the check read ("global wifi_on is 0; the task wants 1"), or why the task could
    /// not be run or checked.
    pub finding: String,
    /// Whether the agent said it succeeded (never counted: the check decides).
    pub agent_claimed_success: bool,
    pub agent_answer: String,
    pub steps: u32,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub model_calls: u64,
    pub model_ms: u64,
    pub wall_ms: u64,
    /// Resetting the phone and running the task's setup, in microseconds.
    pub setup_us: u64,
    /// The task ran, but setting it up or checking it failed (not the agent's doing).
    pub error: Option<String>,
}

impl TaskRecord {
    /// A record for an instance whose run or check failed before a finding.
    pub fn failed(inst: &Instance, error: String, wall: Duration) -> Self {
        Self {
            finding: error.clone(),
            error: Some(error),
            wall_ms: wall.as_millis() as u64,
            ..Self::new(inst)
        }
    }

    pub fn new(inst: &Instance) -> Self {
        Self {
            id: inst.id.clone(),
            template: inst.template.clone(),
            seed: inst.seed,
            params: inst.values.clone(),
            goal: inst.goal.clone(),
            success: false,
            score: 0.0,
            finding: String::new(),
            agent_claimed_success: false,
            agent_answer: String::new(),
            steps: 0,
            tokens_in: 0,
            tokens_out: 0,
            model_calls: 0,
            model_ms: 0,
            wall_ms: 0,
            setup_us: 0,
            error: None,
        }
    }

    pub fn found(&mut self, f: Finding) {
        self.success = f.success;
        self.score = f.score;
        self.finding = f.detail;
    }
}

/// The whole run.
#[derive(Debug, Serialize)]
pub struct Report {
    /// What was measured: the agent (a model's name, or a scripted agent) and the mode.
    pub agent: String,
    pub mode: &'static str,
    pub suite: String,
    pub tasks: Vec<TaskRecord>,
    pub summary: Summary,
}

#[derive(Debug, Serialize)]
pub struct Summary {
    pub instances: usize,
    pub successes: usize,
    pub success_rate: f64,
    /// Wilson's 95% interval of the success rate.
    pub ci95: [f64; 2],
    pub mean_score: f64,
    pub errors: usize,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub tokens_per_success: Option<f64>,
    pub wall_ms: u64,
    pub model_ms: u64,
    pub wall_ms_per_success: Option<f64>,
    /// The median time to reset a phone and set its task up, in microseconds.
    pub setup_us_p50: u64,
}

impl Summary {
    pub fn of(tasks: &[TaskRecord], wall: Duration) -> Self {
        let n = tasks.len();
        let successes = tasks.iter().filter(|t| t.success).count();
        let (lo, hi) = stats::wilson95(successes, n);
        let tokens_in = tasks.iter().map(|t| t.tokens_in).sum();
        let tokens_out: u64 = tasks.iter().map(|t| t.tokens_out).sum();
        let wall_ms = wall.as_millis() as u64;
        let per = |x: f64| (successes > 0).then(|| x / successes as f64);
        Self {
            instances: n,
            successes,
            success_rate: if n == 0 {
                0.0
            } else {
                successes as f64 / n as f64
            },
            ci95: [lo, hi],
            mean_score: if n == 0 {
                0.0
            } else {
                tasks.iter().map(|t| t.score).sum::<f64>() / n as f64
            },
            errors: tasks.iter().filter(|t| t.error.is_some()).count(),
            tokens_in,
            tokens_out,
            tokens_per_success: per((tokens_in + tokens_out) as f64),
            wall_ms,
            model_ms: tasks.iter().map(|t| t.model_ms).sum(),
            wall_ms_per_success: per(wall_ms as f64),
            setup_us_p50: {
                let mut s: Vec<u64> = tasks.iter().map(|t| t.setup_us).collect();
                s.sort_unstable();
                s.get(s.len() / 2).copied().unwrap_or(0)
            },
        }
    }
}

/// The table printed at the end of a run.
pub fn table(report: &Report) -> String {
    let mut out = format!(
        "{:<34} {:>4} {:>5} {:>5} {:>8} {:>8} {:>8} {:>8}  finding\n",
        "task", "ok", "score", "steps", "tok in", "tok out", "model ms", "wall ms"
    );
    for t in &report.tasks {
        out.push_str(&format!(
            "{:<34} {:>4} {:>5.2} {:>5} {:>8} {:>8} {:>8} {:>8}  {}\n",
            t.id,
            if t.success { "yes" } else { "no" },
            t.score,
            t.steps,
            t.tokens_in,
            t.tokens_out,
            t.model_ms,
            t.wall_ms,
            t.finding
        ));
    }
    let s = &report.summary;
    out.push_str(&format!(
        "\n{} of {} succeeded: {:.1}% (95% CI {:.1}% to {:.1}%), mean score {:.2}",
        s.successes,
        s.instances,
        s.success_rate * 100.0,
        s.ci95[0] * 100.0,
        s.ci95[1] * 100.0,
        s.mean_score
    ));
    if s.errors > 0 {
        out.push_str(&format!(
            "; {} could not be set up or checked (see their findings)",
            s.errors
        ));
    }
    out.push_str(&format!(
        "\nagent: {} ({} mode); {} tokens in, {} out",
        report.agent, report.mode, s.tokens_in, s.tokens_out
    ));
    if let (Some(tok), Some(ms)) = (s.tokens_per_success, s.wall_ms_per_success) {
        out.push_str(&format!(
            "; per success: {tok:.0} tokens, {:.2} s of the run",
            ms / 1000.0
        ));
    }
    out.push_str(&format!(
        "\nwall time {:.1} s, of it {:.1} s in model calls (summed over tasks); a phone reset and set up in {:.1} ms (median)\n",
        s.wall_ms as f64 / 1000.0,
        s.model_ms as f64 / 1000.0,
        s.setup_us_p50 as f64 / 1000.0
    ));
    out
}

/// The run as JUnit XML: one test case per task instance, a failure for each that failed.
pub fn junit(report: &Report) -> String {
    let s = &report.summary;
    let failures = report
        .tasks
        .iter()
        .filter(|t| t.error.is_none() && !t.success)
        .count();
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuite name=\"droidmesh eval\" tests=\"{}\" failures=\"{failures}\" errors=\"{}\" time=\"{:.3}\">\n",
        s.instances,
        s.errors,
        s.wall_ms as f64 / 1000.0
    );
    for t in &report.tasks {
        out.push_str(&format!(
            "  <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\">",
            xml(&t.template),
            xml(&t.id),
            t.wall_ms as f64 / 1000.0
        ));
        match (&t.error, t.success) {
            (Some(e), _) => out.push_str(&format!("<error message=\"{}\"/>", xml(e))),
            (None, false) => out.push_str(&format!(
                "<failure message=\"{}\">goal: {}</failure>",
                xml(&t.finding),
                xml(&t.goal)
            )),
            (None, true) => {}
        }
        out.push_str("</testcase>\n");
    }
    out.push_str("</testsuite>\n");
    out
}

/// Text safe inside XML attributes and elements (characters XML 1.0 cannot carry dropped).
fn xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn junit_escapes_what_xml_cannot_hold_and_counts_failures() {
        let mut ok = TaskRecord::new(&sample("a"));
        ok.success = true;
        let mut bad = TaskRecord::new(&sample("b"));
        bad.finding = "contacts has no row for \"Zoë\" <x> & \u{1}".into();
        let tasks = vec![ok, bad];
        let report = Report {
            agent: "oracle".into(),
            mode: "direct",
            suite: "builtin".into(),
            summary: Summary::of(&tasks, Duration::from_millis(1500)),
            tasks,
        };
        let x = junit(&report);
        assert!(x.contains("tests=\"2\" failures=\"1\" errors=\"0\""), "{x}");
        assert!(
            x.contains("message=\"contacts has no row for &quot;Zoë&quot; &lt;x&gt; &amp; \""),
            "{x}"
        );
        let t = table(&report);
        assert!(t.contains("1 of 2 succeeded: 50.0%"), "{t}");
    }

    fn sample(id: &str) -> Instance {
        let families = droidmesh_eval::builtin().unwrap();
        let mut i = droidmesh_eval::select(&families, &["settings/wifi".into()], 1)
            .unwrap()
            .remove(0);
        i.id = id.into();
        i
    }
}
