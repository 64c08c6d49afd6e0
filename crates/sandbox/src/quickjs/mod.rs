//! The QuickJS engine (QuickJS-NG through rquickjs).

mod convert;
mod errors;
mod host;
mod run;
mod state;
mod toplevel;

use std::{collections::HashSet, rc::Rc};

use rquickjs::{Context, Ctx, Function, Object, Runtime, object::Property};
use serde_json::Value as Json;

use crate::{
    Capabilities, Engine, EngineInstance, MemoryStats, Prepared, RunControl, RunOutcome,
    SandboxLimits,
    capability::is_identifier,
    error::{Result, SandboxError},
};
use state::Shared;

/// The QuickJS engine: one runtime and one context per session, all standard built-ins
/// (no `std`/`os` modules, no module loader), plus exactly the granted capabilities.
#[derive(Debug, Clone, Copy, Default)]
pub struct QuickJs;

impl Engine for QuickJs {
    fn name(&self) -> &'static str {
        "quickjs"
    }

    fn instantiate(
        &self,
        limits: &SandboxLimits,
        capabilities: Capabilities,
    ) -> Result<Box<dyn EngineInstance>> {
        Ok(Box::new(Instance::new(limits, capabilities)?))
    }

    fn prepare(&self) -> Option<Prepared> {
        bare()
            .ok()
            .map(|(runtime, context)| Prepared::new(Bare { runtime, context }))
    }

    fn instantiate_prepared(
        &self,
        prepared: Prepared,
        limits: &SandboxLimits,
        capabilities: Capabilities,
    ) -> Result<Box<dyn EngineInstance>> {
        match prepared.take::<Bare>() {
            Some(b) => Ok(Box::new(Instance::build(
                b.runtime,
                b.context,
                limits,
                capabilities,
            )?)),
            None => self.instantiate(limits, capabilities),
        }
    }
}

/// A runtime and a context with the standard built-ins, made ahead of a session; no script
/// has run in it and no limit or capability is set yet.
struct Bare {
    // Drop order: the context before the runtime.
    context: Context,
    runtime: Runtime,
}

fn bare() -> Result<(Runtime, Context)> {
    let runtime = Runtime::new().map_err(engine_error)?;
    let context = Context::full(&runtime).map_err(engine_error)?;
    Ok((runtime, context))
}

/// A QuickJS runtime and its one context.
pub(crate) struct Instance {
    // Drop order: the context before the runtime.
    context: Context,
    runtime: Runtime,
    shared: Rc<Shared>,
    limits: SandboxLimits,
    reserved: HashSet<String>,
    /// Names the host set with `set_global`: a run's declaration of one is not rewritten.
    host_globals: HashSet<String>,
}

fn engine_error(error: impl std::fmt::Display) -> SandboxError {
    SandboxError::Engine(error.to_string())
}

impl Instance {
    fn new(limits: &SandboxLimits, capabilities: Capabilities) -> Result<Self> {
        let (runtime, context) = bare()?;
        Self::build(runtime, context, limits, capabilities)
    }

    /// Applies the limits and grants the capabilities on a fresh runtime and context.
    fn build(
        runtime: Runtime,
        context: Context,
        limits: &SandboxLimits,
        capabilities: Capabilities,
    ) -> Result<Self> {
        capabilities.validate()?;
        runtime.set_memory_limit(limits.memory_bytes);
        runtime.set_max_stack_size(limits.stack_bytes);
        let shared = Rc::new(Shared::new(limits.console_bytes));
        let interrupt = Rc::clone(&shared);
        runtime.set_interrupt_handler(Some(Box::new(move || interrupt.stop_reason().is_some())));

        let mut reserved: HashSet<String> = capabilities
            .functions
            .iter()
            .map(|f| f.name.clone())
            .collect();
        context
            .with(|ctx| -> rquickjs::Result<()> {
                let object: Object = ctx.globals().get("Object")?;
                let freeze: Function = object.get("freeze")?;
                for function in capabilities.functions {
                    let name = function.name.clone();
                    let max = limits.max_string_arg_bytes;
                    let f = host::host_function(&ctx, function, Rc::clone(&shared), max)?;
                    host::define_frozen(&ctx, &freeze, &name, f.into_value())?;
                }
                if capabilities.console {
                    let console = host::console(&ctx, &shared)?;
                    host::define_frozen(&ctx, &freeze, "console", console.into_value())?;
                }
                if let Some(max) = capabilities.sleep {
                    let sleep = host::sleep(&ctx, &shared, max)?;
                    host::define_frozen(&ctx, &freeze, "sleep", sleep.into_value())?;
                }
                Ok(())
            })
            .map_err(engine_error)?;
        if capabilities.console {
            reserved.insert("console".into());
        }
        if capabilities.sleep.is_some() {
            reserved.insert("sleep".into());
        }
        let mut instance = Self {
            context,
            runtime,
            shared,
            limits: limits.clone(),
            reserved,
            host_globals: HashSet::new(),
        };
        for (name, value) in &capabilities.globals {
            instance.set_global(name, value)?;
        }
        Ok(instance)
    }
}

impl Instance {
    /// Defines the global `name` (writable, enumerable) as what `make` builds, after checking
    /// that the name is an identifier and not a granted function.
    fn define_global(
        &mut self,
        name: &str,
        make: impl for<'js> FnOnce(&Ctx<'js>) -> rquickjs::Result<rquickjs::Value<'js>>,
    ) -> Result<()> {
        let refuse = |reason: &str| SandboxError::InvalidGlobal {
            name: name.to_string(),
            reason: reason.to_string(),
        };
        if !is_identifier(name) {
            return Err(refuse("the name is not a JavaScript identifier"));
        }
        if self.reserved.contains(name) {
            return Err(refuse("the name belongs to a granted function"));
        }
        self.context.with(|ctx| {
            let defined = make(&ctx).and_then(|value| {
                ctx.globals()
                    .prop(name, Property::from(value).writable().enumerable())
            });
            defined.map_err(|_| {
                let error = ctx.catch();
                let why = host::display(&ctx, &error);
                refuse(&why)
            })
        })?;
        self.host_globals.insert(name.to_owned());
        Ok(())
    }
}

impl EngineInstance for Instance {
    fn run(&mut self, code: &str, control: &RunControl) -> RunOutcome {
        run::run(self, code, control)
    }

    fn set_global(&mut self, name: &str, value: &Json) -> Result<()> {
        self.define_global(name, |ctx| convert::json_to_js(ctx, value))
    }

    fn set_global_json(&mut self, name: &str, json: &str) -> Result<()> {
        self.define_global(name, |ctx| ctx.json_parse(json))
    }

    fn memory_usage(&self) -> MemoryStats {
        let usage = self.runtime.memory_usage();
        MemoryStats {
            allocated_bytes: u64::try_from(usage.malloc_size).unwrap_or_default(),
            limit_bytes: u64::try_from(usage.malloc_limit).unwrap_or_default(),
            objects: u64::try_from(usage.obj_count).unwrap_or_default(),
        }
    }
}
