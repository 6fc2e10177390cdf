//! Test hosts: client machines (and the server's) made on this one as Linux network
//! namespaces, each with its own address on one bridge, so that a distributed client
//! (Tsung) runs one node per host over a real link (veth) as it would across machines.
//!
//! - **Addresses**: one private /24 of archzoo's own, [`SUBNET`]`.0/24`, used by nothing
//!   else: the bridge is `.1` (the controller's side, in this namespace), the server host
//!   `.2`, client host *i* `.(10 + i)`. No traffic goes anywhere else.
//! - **Names**: every namespace, link and bridge starts with [`PREFIX`], so that a set left
//!   by a killed run is found and removed at the next start ([`remove_stale`]).
//! - **Removal, whatever happens**: [`Hosts::create`] starts a reaper — a shell in a
//!   session of its own, deaf to Ctrl-C, reading a pipe from this process — that removes
//!   every host (and the daemons left in them, such as Erlang's `epmd`) the moment the pipe
//!   closes: when the `Hosts` is dropped, when bench exits on an error or a signal, even
//!   when it is SIGKILLed. Nothing is done from a signal handler.

use std::io::Write;
use std::net::Ipv4Addr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::procfs;
use variants::launch;

/// The first three octets of the test hosts' /24.
pub const SUBNET: [u8; 3] = [10, 77, 203];
/// The prefix of every namespace, link and bridge archzoo makes.
pub const PREFIX: &str = "azh-";
/// The bridge every host is joined to.
pub const BRIDGE: &str = "azh-br0";

/// The ephemeral ports of a client host (`net.ipv4.ip_local_port_range`, which each
/// namespace has its own of): all above the well-known ones, not the default 28,000. Tsung
/// (Erlang's `gen_tcp`) binds every socket to port 0 before it connects, and since Linux
/// 4.6 such a bind takes only odd ports — half the range: past ~14,000 connections on the
/// default range every new one scanned the whole range for a free port (a node spent its
/// CPU in `inet_bind_conflict`, and 100,000 connections over 6 hosts slowed from 600 to
/// 100 a second at 15,000 a host).
pub const CLIENT_PORTS: (u16, u16) = (1024, 65535);

/// The settings every test host gets (each namespace has its own): [`CLIENT_PORTS`], and
/// no TIME_WAIT sockets: a host that closed 16,666 connections kept their ports for a
/// minute, and a bind to port 0 does not take a port in TIME_WAIT — the next server's
/// 16,666 would not have fitted the odd half of the range. A test client has no use for
/// what TIME_WAIT guards against (an old connection's late segments).
fn host_settings() -> [String; 2] {
    [
        format!(
            "net.ipv4.ip_local_port_range={} {}",
            CLIENT_PORTS.0, CLIENT_PORTS.1
        ),
        "net.ipv4.tcp_max_tw_buckets=0".to_string(),
    ]
}

/// One test host: a network namespace with one address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// The namespace's name (`azh-srv`, `azh-c1`, …), also the host's name for Tsung.
    pub name: String,
    pub addr: Ipv4Addr,
    /// The network namespace it is (a test host); `None`: this machine itself, on one of
    /// its addresses (the server when the client hosts are real machines).
    pub netns: Option<String>,
}

impl Host {
    /// This machine, on `addr`: where the servers listen for real client hosts.
    pub fn here(addr: Ipv4Addr) -> Host {
        Host {
            name: "this machine".into(),
            addr,
            netns: None,
        }
    }

    /// Runs `argv` inside this host to its end; `Err` is `failed(what it said)` when it
    /// fails, or why it could not run.
    fn run(&self, argv: &[&str], failed: impl FnOnce(&str) -> String) -> Result<(), String> {
        let out = self
            .command(argv)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run {}: {e}", argv[0]))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(failed(String::from_utf8_lossy(&out.stderr).trim()))
        }
    }

    /// `argv` as a command run inside this host (`ip netns exec NAME …`).
    pub fn command(&self, argv: &[&str]) -> Command {
        match &self.netns {
            Some(ns) => {
                let mut cmd = Command::new("ip");
                cmd.args(["netns", "exec", ns]).args(argv);
                cmd
            }
            None => {
                let mut cmd = Command::new(argv[0]);
                cmd.args(&argv[1..]);
                cmd
            }
        }
    }
}

/// The two test hosts of `--link veth` for a client that is one process here (ab, wrk,
/// oha): the servers run in one, the client in the other, over veth and the bridge.
#[derive(Debug, Clone)]
pub struct Wire {
    pub server: Host,
    pub client: Host,
}

/// The address of the bridge's own end, in this (the controller's) namespace.
pub fn bridge_addr() -> Ipv4Addr {
    Ipv4Addr::new(SUBNET[0], SUBNET[1], SUBNET[2], 1)
}

/// A server host and `n` client hosts on one bridge; removed when dropped.
pub struct Hosts {
    pub server: Host,
    pub clients: Vec<Host>,
    /// A folder for what runs on the hosts writes here (Tsung's configurations and
    /// logs), removed with them.
    pub scratch: PathBuf,
    /// The reaper's stdin: closing it (drop, exit, death) removes every host.
    reaper: Option<(Child, ChildStdin)>,
}

impl Hosts {
    /// Makes the hosts (after removing any left by a killed run). `Err` is one line that
    /// says what is missing: `ip`, or the right to make namespaces (`CAP_NET_ADMIN`).
    pub fn create(clients: usize) -> Result<Hosts, String> {
        if clients == 0 || clients > 200 {
            return Err(format!(
                "--client-hosts takes 1 to 200 test hosts, not {clients}"
            ));
        }
        if Command::new("ip")
            .arg("-V")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_err()
        {
            return Err(
                "test hosts need `ip` (Debian: apt-get install iproute2; scripts/bench installs it)"
                    .into(),
            );
        }
        remove_stale();
        let server = Host {
            name: format!("{PREFIX}srv"),
            addr: Ipv4Addr::new(SUBNET[0], SUBNET[1], SUBNET[2], 2),
            netns: Some(format!("{PREFIX}srv")),
        };
        let clients: Vec<Host> = (1..=clients)
            .map(|i| Host {
                name: format!("{PREFIX}c{i}"),
                addr: Ipv4Addr::new(SUBNET[0], SUBNET[1], SUBNET[2], 10 + i as u8),
                netns: Some(format!("{PREFIX}c{i}")),
            })
            .collect();
        let scratch = std::env::temp_dir().join(format!("archzoo-hosts-{}", std::process::id()));
        // The reaper first: whatever fails below, what was made is removed.
        let reaper = start_reaper(&scratch)?;
        let hosts = Hosts {
            server,
            clients,
            scratch,
            reaper: Some(reaper),
        };
        ip(&["link", "add", BRIDGE, "type", "bridge"]).map_err(|e| {
            if e.contains("Operation not permitted") {
                "test hosts need CAP_NET_ADMIN to make network namespaces (run as root)".to_string()
            } else {
                e
            }
        })?;
        ip(&[
            "addr",
            "add",
            &format!("{}/24", bridge_addr()),
            "dev",
            BRIDGE,
        ])?;
        ip(&["link", "set", BRIDGE, "up"])?;
        for host in hosts.all() {
            join(host)?;
        }
        Ok(hosts)
    }

    /// Every host, the server's first.
    pub fn all(&self) -> impl Iterator<Item = &Host> {
        std::iter::once(&self.server).chain(&self.clients)
    }

    /// Steers each host's receive path to its own CPUs (RPS on its `eth0`): the server
    /// host's to `server_cpus`, the client hosts' to `client_cpus`. A veth end hands what
    /// it receives to the *sending* CPU's backlog, as loopback does; with RPS the packet
    /// goes on to the receiver's CPUs, where a NIC's interrupt would have put it — so each
    /// side's CPU pays for what it receives, and a test host is closer to a machine.
    pub fn steer(&self, server_cpus: &[usize], client_cpus: &[usize]) -> Result<(), String> {
        for host in self.all() {
            let cpus = if host == &self.server {
                server_cpus
            } else {
                client_cpus
            };
            let write = format!(
                "echo {} > /sys/class/net/eth0/queues/rx-0/rps_cpus",
                cpu_mask(cpus)
            );
            host.run(&["sh", "-c", &write], |said| {
                format!(
                    "cannot steer {}'s receive path to CPUs {cpus:?} (RPS): {said}",
                    host.name
                )
            })?;
        }
        Ok(())
    }
}

/// `cpus` as the kernel writes a CPU mask (`rps_cpus`): hexadecimal, in comma-separated
/// groups of 32 CPUs, the highest first.
pub fn cpu_mask(cpus: &[usize]) -> String {
    let groups = cpus.iter().max().map_or(1, |&top| top / 32 + 1);
    let mut words = vec![0u32; groups];
    for &cpu in cpus {
        words[cpu / 32] |= 1 << (cpu % 32);
    }
    words
        .iter()
        .rev()
        .map(|w| format!("{w:08x}"))
        .collect::<Vec<_>>()
        .join(",")
}

impl Drop for Hosts {
    fn drop(&mut self) {
        if let Some((mut child, stdin)) = self.reaper.take() {
            drop(stdin);
            // The reaper removes everything, then exits: wait for it so that nothing is
            // left when the caller goes on (a test checks at once).
            let _ = child.wait();
        }
    }
}

/// Makes `host`'s namespace and joins it to the bridge with a veth pair.
fn join(host: &Host) -> Result<(), String> {
    let outer = format!("{}-v", host.name);
    ip(&["netns", "add", &host.name])?;
    ip(&[
        "link", "add", &outer, "type", "veth", "peer", "name", "eth0", "netns", &host.name,
    ])?;
    ip(&["link", "set", &outer, "master", BRIDGE, "up"])?;
    let inside = |argv: &[&str]| {
        let mut all = vec!["-n", host.name.as_str()];
        all.extend_from_slice(argv);
        ip(&all)
    };
    inside(&["addr", "add", &format!("{}/24", host.addr), "dev", "eth0"])?;
    inside(&["link", "set", "eth0", "up"])?;
    inside(&["link", "set", "lo", "up"])?;
    for setting in host_settings() {
        host.run(&["sysctl", "-q", "-w", &setting], |said| {
            format!("sysctl {setting} in {}: {said}", host.name)
        })?;
    }
    Ok(())
}

/// Runs `ip ARGS`; `Err` holds what it said.
fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The shell that removes every test host: each namespace's processes killed (a Tsung
/// node, `epmd`), the namespace deleted (its veth end goes with it), then the bridge.
const REMOVE: &str = r#"
for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^azh-'); do
    pids=$(ip netns pids "$ns" 2>/dev/null)
    for pid in $pids; do kill -9 "$pid" 2>/dev/null; done
    # Until they are gone (at most 5 s): nothing of a run outlives it.
    for pid in $pids; do
        i=0; while [ -d /proc/$pid ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done
    done
    ip netns del "$ns" 2>/dev/null
done
for link in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 | grep '^azh-'); do
    ip link del "$link" 2>/dev/null
done
true
"#;

/// Removes the test hosts of an earlier run that could not (killed with its reaper, or a
/// machine that lost power mid-run).
pub fn remove_stale() {
    let _ = Command::new("sh")
        .args(["-c", REMOVE])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Erlang's port mapper in this namespace, started by the Tsung controller (`epmd
/// -daemon` outlives it): stopped unless it ran before the hosts were made (`$KEEP`).
const REMOVE_EPMD: &str = r#"
here=$(readlink /proc/self/ns/net)
for pid in $(pgrep -x epmd); do
    [ "$(readlink /proc/$pid/ns/net)" = "$here" ] || continue
    case " $KEEP " in *" $pid "*) ;; *)
        kill "$pid" 2>/dev/null
        i=0; while [ -d /proc/$pid ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done ;;
    esac
done
"#;

/// Starts the reaper: it waits for its stdin to close, then removes every host, the
/// `epmd` of this namespace if there was none before, and the `scratch` folder.
fn start_reaper(scratch: &Path) -> Result<(Child, ChildStdin), String> {
    let keep = epmd_pids();
    let script = format!(
        "trap '' INT TERM HUP; KEEP='{}'; cat >/dev/null; {REMOVE} {REMOVE_EPMD} rm -rf {}",
        keep.join(" "),
        launch::shell_word(&scratch.display().to_string())
    );
    let mut cmd = Command::new("sh");
    cmd.args(["-c", &script])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: setsid is async-signal-safe; the reaper leaves bench's process group and
    // session, so neither Ctrl-C at the terminal nor bench's group kill reaches it.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start the test hosts' reaper: {e}"))?;
    let mut stdin = child.stdin.take().ok_or("the reaper has no stdin")?;
    // A byte proves the pipe is up; the reaper reads until it closes.
    let _ = stdin.write_all(b"\n");
    Ok((child, stdin))
}

/// The words `argv` prints on stdout (nothing if it cannot run).
fn words(argv: &[&str]) -> Vec<String> {
    Command::new(argv[0])
        .args(&argv[1..])
        .stderr(Stdio::null())
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The pids of every Erlang port mapper (`epmd`) running now, in any namespace.
pub fn epmd_pids() -> Vec<String> {
    words(&["pgrep", "-x", "epmd"])
}

/// The test hosts that exist now (namespaces named with [`PREFIX`]): empty after a run.
pub fn existing() -> Vec<String> {
    // `ip netns list` prints `NAME (id: N)`: only the names start with the prefix.
    words(&["ip", "netns", "list"])
        .into_iter()
        .filter(|w| w.starts_with(PREFIX))
        .collect()
}

/// The processes of namespace `ns` now (`ip netns pids`).
fn pids_of(ns: &str) -> Vec<i32> {
    words(&["ip", "netns", "pids", ns])
        .iter()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Whether test host `ns` runs anything now. Erlang's port mapper, started by the first
/// node, outlives each node: a host is running while it has another process.
pub fn running(ns: &str) -> bool {
    pids_of(ns).iter().any(|p| !is_epmd(*p))
}

/// Whether process `pid` is Erlang's port mapper.
fn is_epmd(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "epmd")
}

/// The CPU each test host's processes spend during a run. A Tsung node starts with the
/// run and ends with it, so it is read every 250 ms while it lives: each process's last
/// reading counts (the CPU of its last quarter second before exit is lost).
pub struct CpuWatch {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Vec<Watched>>,
}

/// What [`CpuWatch`] saw of one host.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Watched {
    /// CPU seconds of its processes.
    pub cpu_secs: f64,
    /// The last moment it had a process, in seconds from the watch's start (`None`: never
    /// seen one).
    pub last_seen_s: Option<f64>,
}

/// The hosts whose processes ended while another's ran on for more than `margin`
/// seconds (a node killed or crashed mid-run; at a normal end the controller stops them
/// all within a second): each one's index and when it was last seen.
pub fn ended_early(watched: &[Watched], margin: f64) -> Vec<(usize, f64)> {
    let last = watched
        .iter()
        .filter_map(|w| w.last_seen_s)
        .fold(0.0, f64::max);
    watched
        .iter()
        .enumerate()
        .filter_map(|(i, w)| Some((i, w.last_seen_s?)))
        .filter(|(_, seen)| seen + margin < last)
        .collect()
}

impl CpuWatch {
    /// Starts reading the processes of `namespaces`.
    pub fn start(namespaces: Vec<String>) -> CpuWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let started = std::time::Instant::now();
            let mut last: Vec<std::collections::HashMap<i32, f64>> =
                vec![Default::default(); namespaces.len()];
            let mut seen_at = vec![None; namespaces.len()];
            loop {
                let done = flag.load(Ordering::Relaxed);
                for ((ns, seen), at) in namespaces.iter().zip(&mut last).zip(&mut seen_at) {
                    let pids = pids_of(ns);
                    if pids.iter().any(|p| !is_epmd(*p)) {
                        *at = Some(started.elapsed().as_secs_f64());
                    }
                    for (pid, cpu) in procfs::cpu_by_pid(&pids) {
                        seen.insert(pid, cpu);
                    }
                }
                if done {
                    return last
                        .iter()
                        .zip(seen_at)
                        .map(|(m, at)| Watched {
                            cpu_secs: m.values().sum(),
                            last_seen_s: at,
                        })
                        .collect();
                }
                std::thread::sleep(Duration::from_millis(250));
            }
        });
        CpuWatch { stop, thread }
    }

    /// Stops reading: what it saw of each host, in the order of the namespaces.
    pub fn stop(self) -> Vec<Watched> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cpu_mask_is_written_as_the_kernel_reads_it() {
        assert_eq!(cpu_mask(&[0]), "00000001");
        assert_eq!(cpu_mask(&[1, 3]), "0000000a");
        assert_eq!(cpu_mask(&[0, 33]), "00000002,00000001");
        assert_eq!(cpu_mask(&[]), "00000000");
    }

    #[test]
    fn a_host_that_ended_while_the_others_ran_on_is_found() {
        let w = |seen: Option<f64>| Watched {
            cpu_secs: 1.0,
            last_seen_s: seen,
        };
        // A normal end: every node within a second of the others.
        assert!(ended_early(&[w(Some(9.5)), w(Some(10.0))], 2.0).is_empty());
        // One killed at 4 s, the other ran to 10 s; one never seen is not "ended".
        assert_eq!(
            ended_early(&[w(Some(10.0)), w(Some(4.0)), w(None)], 2.0),
            vec![(1, 4.0)]
        );
    }
}
