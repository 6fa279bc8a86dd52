//! The two `aws-cloud-controller-manager` replicas under leader election (short lease timings, so that a
//! failover takes seconds), killed and restarted by the chaos task. Which one leads is read from each replica's
//! `leader_election_master_status` on /metrics.

use std::{
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::Duration,
};

use anyhow::Context;
use ccm_testing::{TestEnv, metrics};
use tokio::time::Instant;

use crate::world::World;

pub struct Replica {
    child: Option<Child>,
    pub port: u16,
    starts: u32,
    name: &'static str,
}

pub struct Replicas {
    pub members: [Replica; 2],
    lease: String,
    config: PathBuf,
    dir: PathBuf,
    kubeconfig: PathBuf,
}

impl Replicas {
    pub fn start(world: &World, env: &TestEnv) -> anyhow::Result<Self> {
        let replica = |name| Replica {
            child: None,
            port: 0,
            starts: 0,
            name,
        };
        let mut replicas = Self {
            members: [replica("a"), replica("b")],
            lease: format!("ccm-{}", world.id),
            config: world.ccm_config.clone(),
            dir: world.dir.clone(),
            kubeconfig: env.kubeconfig.clone(),
        };
        replicas.spawn(0)?;
        replicas.spawn(1)?;
        Ok(replicas)
    }

    /// Starts replica `k` (again), serving /metrics on a fresh port, its log in the run's directory.
    pub fn spawn(&mut self, k: usize) -> anyhow::Result<()> {
        let path = std::env::current_exe()?.with_file_name("aws-cloud-controller-manager");
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let r = &mut self.members[k];
        r.starts += 1;
        let log = self.dir.join(format!("ccm-{}-{}.log", r.name, r.starts));
        let out = std::fs::File::create(&log)?;
        let child = Command::new(&path)
            .args(["--cloud-provider=aws", "--v=2", "--bind-address=127.0.0.1"])
            .arg(format!("--secure-port={port}"))
            .arg("--authorization-always-allow-paths=/healthz,/metrics")
            .arg(format!("--cloud-config={}", self.config.display()))
            .arg(format!("--kubeconfig={}", self.kubeconfig.display()))
            .arg(format!("--leader-elect-resource-name={}", self.lease))
            .args([
                "--leader-elect-lease-duration=6s",
                "--leader-elect-renew-deadline=4s",
            ])
            .args(["--leader-elect-retry-period=1s", "--node-monitor-period=2s"])
            .env("AWS_ACCESS_KEY_ID", "soak")
            .env("AWS_SECRET_ACCESS_KEY", "soak")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .with_context(|| format!("starting {} (build it first)", path.display()))?;
        r.child = Some(child);
        r.port = port;
        Ok(())
    }

    /// The replica holding the lease now, if one does (and only one says so).
    pub async fn leader(&self) -> Option<usize> {
        let mut leaders = Vec::new();
        for (k, r) in self.members.iter().enumerate() {
            if r.child.is_some() && r.is_leader(&self.lease).await {
                leaders.push(k);
            }
        }
        (leaders.len() == 1).then(|| leaders[0])
    }

    /// Waits up to `secs` for a leader; returns it and how long it took.
    pub async fn await_leader(&self, secs: u64) -> Option<(usize, Duration)> {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(secs) {
            if let Some(k) = self.leader().await {
                return Some((k, started.elapsed()));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        None
    }

    /// SIGKILL (a crash: the lease stays held until it expires).
    pub fn kill(&mut self, k: usize) {
        if let Some(mut child) = self.members[k].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM (a rollout: the lease is released) and the wait for the exit; `false` when it had to be killed.
    pub async fn stop(&mut self, k: usize) -> bool {
        let Some(mut child) = self.members[k].child.take() else {
            return true;
        };
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        for _ in 0..300 {
            if matches!(child.try_wait(), Ok(Some(_))) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let _ = child.kill();
        let _ = child.wait();
        false
    }

    /// Replicas that exited on their own (a crash the harness did not cause), restarted; returns how many.
    pub fn restart_exited(&mut self) -> anyhow::Result<u32> {
        let mut exited = 0;
        for k in 0..2 {
            let gone = match self.members[k].child.as_mut() {
                Some(child) => matches!(child.try_wait(), Ok(Some(_))),
                None => true,
            };
            if gone {
                exited += u32::from(self.members[k].child.is_some());
                self.spawn(k)?;
            }
        }
        Ok(exited)
    }

    /// Both stopped with SIGTERM; the number of replicas that did not stop within 30 s.
    pub async fn stop_all(&mut self) -> u32 {
        let mut stuck = 0;
        for k in 0..2 {
            stuck += u32::from(!self.stop(k).await);
        }
        stuck
    }
}

impl Replica {
    async fn is_leader(&self, lease: &str) -> bool {
        let Ok(text) = metrics::scrape(self.port).await else {
            return false;
        };
        let sample = format!("leader_election_master_status{{name=\"{lease}\"}} 1");
        text.lines().any(|l| l.trim() == sample)
    }
}

impl Drop for Replicas {
    fn drop(&mut self) {
        for k in 0..2 {
            self.kill(k);
        }
    }
}
