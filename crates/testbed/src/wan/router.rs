//! The emulator as the testbed runs it: on its own thread in the router
//! namespace, with the NFQUEUE rule that feeds it, started once bound and
//! stopped and joined on drop.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

use super::{Emulator, ForwardQueueRule, LossControl, WanConfig, WanStats};
use crate::netns::{Netns, NetnsError};

/// How long the emulator may take to bind its queue and install its rule.
const START_TIMEOUT: Duration = Duration::from_secs(10);

type EmulatorThread = JoinHandle<Result<Result<WanStats, String>, NetnsError>>;

/// The emulator running in a router namespace.
pub struct RouterEmulator {
    stop: Arc<AtomicBool>,
    thread: Option<EmulatorThread>,
    loss: LossControl,
}

impl RouterEmulator {
    /// Binds the emulator's queue and installs its rule in `router`; an
    /// error says which step failed.
    pub fn start(router: &Netns, config: WanConfig, seed: u64) -> Result<RouterEmulator, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let (ready_tx, ready_rx) = mpsc::channel::<Result<LossControl, String>>();
        let thread = router
            .spawn("wan", move || -> Result<WanStats, String> {
                let started =
                    Emulator::bind(&config)
                        .map_err(|e| e.to_string())
                        .and_then(|emulator| {
                            ForwardQueueRule::install(config.queue_num)
                                .map(|rule| (emulator, rule))
                                .map_err(|e| e.to_string())
                        });
                let (emulator, rule) = match started {
                    Ok(started) => started,
                    Err(message) => {
                        let _ = ready_tx.send(Err(message.clone()));
                        return Err(message);
                    }
                };
                let _ = ready_tx.send(Ok(emulator.loss_control()));
                let stats = emulator.run(&flag, seed).map_err(|e| e.to_string());
                drop(rule);
                stats
            })
            .map_err(|e| format!("emulator thread: {e}"))?;
        let loss = match ready_rx.recv_timeout(START_TIMEOUT) {
            Ok(Ok(loss)) => loss,
            failed => {
                stop.store(true, Ordering::Relaxed);
                let _ = thread.join();
                return Err(match failed {
                    Ok(Err(message)) => message,
                    _ => format!("did not start within {} s", START_TIMEOUT.as_secs()),
                });
            }
        };
        Ok(RouterEmulator {
            stop,
            thread: Some(thread),
            loss,
        })
    }

    /// Changes a link's loss while the emulator runs.
    pub fn loss_control(&self) -> &LossControl {
        &self.loss
    }

    /// Stops the emulator and gives its counts.
    pub fn finish(mut self) -> Result<WanStats, String> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(Ok(result))) => result,
            Some(Ok(Err(e))) => Err(e.to_string()),
            Some(Err(_)) => Err("the emulator thread panicked".into()),
            None => Err("already stopped".into()),
        }
    }
}

impl Drop for RouterEmulator {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
