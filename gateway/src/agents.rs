//! The agent services the gateway routes work to: their names as agents and results use them,
//! and one client for each.
use droidmesh_proto::v1::executor_service_client::ExecutorServiceClient;
use droidmesh_proto::v1::manager_service_client::ManagerServiceClient;
use droidmesh_proto::v1::scripter_service_client::ScripterServiceClient;
use droidmesh_proto::v1::text_manipulator_service_client::TextManipulatorServiceClient;
use droidmesh_runtime::TracedChannel;

/// An agent service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Agent {
    Manager,
    Executor,
    Scripter,
    TextManipulator,
}

impl Agent {
    pub const ALL: [Agent; 4] = [
        Agent::Manager,
        Agent::Executor,
        Agent::Scripter,
        Agent::TextManipulator,
    ];

    /// The name events, handoffs and `ActionResult.suggested_agent` use.
    pub fn name(self) -> &'static str {
        match self {
            Agent::Manager => "manager",
            Agent::Executor => "executor",
            Agent::Scripter => "scripter",
            Agent::TextManipulator => "text_manipulator",
        }
    }

    /// The agent a name designates (case-insensitive; `-` and spaces read as `_`).
    pub fn from_name(name: &str) -> Option<Agent> {
        let norm: String = name
            .trim()
            .chars()
            .map(|c| {
                if c == '-' || c == ' ' {
                    '_'
                } else {
                    c.to_ascii_lowercase()
                }
            })
            .collect();
        let norm = norm.as_str();
        Agent::ALL
            .into_iter()
            .find(|a| a.name() == norm)
            .or(match norm {
                "textmanipulator" | "text" => Some(Agent::TextManipulator),
                "planner" => Some(Agent::Manager),
                _ => None,
            })
    }
}

/// One client per agent service (each balanced over its endpoints).
#[derive(Clone)]
pub struct Agents {
    pub manager: ManagerServiceClient<TracedChannel>,
    pub executor: ExecutorServiceClient<TracedChannel>,
    pub scripter: ScripterServiceClient<TracedChannel>,
    pub text_manipulator: TextManipulatorServiceClient<TracedChannel>,
    /// Where each agent is called, as configured, in the order of [`Agent::ALL`].
    pub endpoints: [String; 4],
}

impl Agents {
    /// The configured endpoint (or comma-separated endpoints) of `agent`.
    pub fn endpoint(&self, agent: Agent) -> &str {
        let i = Agent::ALL.iter().position(|a| *a == agent).unwrap_or(0);
        &self.endpoints[i]
    }
}

#[cfg(test)]
mod tests {
    use super::Agent;

    #[test]
    fn names_round_trip_and_tolerate_spelling() {
        for a in Agent::ALL {
            assert_eq!(Agent::from_name(a.name()), Some(a));
        }
        assert_eq!(
            Agent::from_name(" Text-Manipulator "),
            Some(Agent::TextManipulator)
        );
        assert_eq!(Agent::from_name("SCRIPTER"), Some(Agent::Scripter));
        assert_eq!(Agent::from_name("human"), None);
        assert_eq!(Agent::from_name(""), None);
    }
}
