//! The two `aws-cloud-controller-manager` replicas under leader election (short lease timings, so that a
//! failover takes seconds) with the tagging controller on, killed, restarted and cut off by the chaos task. Which
//! one leads is read from each replica's `leader_election_master_status` on /metrics.
//!
//! Each replica has proxies of its own: its fault proxy to moto (`World::proxies`: its cloud config names it),
//! and a TCP proxy to the apiserver, which can cut it off (its kubeconfig names it).

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use anyhow::Context;
use ccm_testing::{TcpDelayProxy, TestEnv, metrics};
use tokio::time::Instant;

use crate::soak::world::World;

pub struct Replica {
    child: Option<Child>,
    pub port: u16,
    starts: u32,
    pub name: &'static str,
    /// Its path to the apiserver.
    pub apiserver: TcpDelayProxy,
    /// Its cloud config and its kubeconfig (the apiserver through `apiserver`).
    config: PathBuf,
    kubeconfig: PathBuf,
}

pub struct Replicas {
    pub members: [Replica; 2],
    lease: String,
    dir: PathBuf,
    /// `--tags` of the tagging controller.
    tags: String,
}

impl Replicas {
    pub async fn start(world: &World, env: &TestEnv) -> anyhow::Result<Self> {
        let mut replicas = Self {
            members: [
                Replica::new("a", &world.ccm_configs[0], world, env).await?,
                Replica::new("b", &world.ccm_configs[1], world, env).await?,
            ],
            lease: format!("ccm-{}", world.id),
            dir: world.dir.clone(),
            tags: format!("soak={}", world.id),
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
            .arg(format!("--cloud-config={}", r.config.display()))
            .arg(format!("--kubeconfig={}", r.kubeconfig.display()))
            .arg(format!("--leader-elect-resource-name={}", self.lease))
            .args([
                "--leader-elect-lease-duration=6s",
                "--leader-elect-renew-deadline=4s",
            ])
            .args(["--leader-elect-retry-period=1s", "--node-monitor-period=2s"])
            .args(["--controllers=*,tagging", "--resources=instance"])
            .arg(format!("--tags={}", self.tags))
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

    /// Waits up to `secs` for a leader other than `old`; returns it and how long it took.
    pub async fn await_other_leader(&self, old: usize, secs: u64) -> Option<(usize, Duration)> {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(secs) {
            match self.leader().await {
                Some(k) if k != old => return Some((k, started.elapsed())),
                _ => tokio::time::sleep(Duration::from_millis(200)).await,
            }
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
    /// Its apiserver proxy and its kubeconfig naming it (in the run's directory); `config`: its cloud config.
    async fn new(name: &'static str, config: &Path, world: &World, env: &TestEnv) -> anyhow::Result<Self> {
        let apiserver = TcpDelayProxy::start(env.kube_apiserver.trim_start_matches("https://")).await?;
        let kubeconfig = world.dir.join(format!("kubeconfig-{name}"));
        let text = std::fs::read_to_string(&env.kubeconfig)?;
        let proxied = format!("https://{}", apiserver.addr());
        std::fs::write(&kubeconfig, text.replace(&env.kube_apiserver, &proxied))?;
        Ok(Self {
            child: None,
            port: 0,
            starts: 0,
            name,
            apiserver,
            config: config.to_owned(),
            kubeconfig,
        })
    }

    /// Whether its /metrics answers and shows no controller running (`running_managed_controllers` 0 or absent).
    pub async fn controllers_stopped(&self) -> bool {
        let Ok(text) = metrics::scrape(self.port).await else {
            return false;
        };
        !text
            .lines()
            .filter(|l| l.starts_with("running_managed_controllers{"))
            .any(|l| l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()) != Some(0.0))
    }

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
