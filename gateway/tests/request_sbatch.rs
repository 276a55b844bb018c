//! The sbatch-compatible parser: every option form, every time format, `#SBATCH` precedence,
//! the shebang rule, `alloc()`, and rendering back to `#SBATCH` lines.

use bursar_gateway::request::{
    parse_delay_boot, parse_priority, parse_sbatch, parse_sbatch_command, parse_sbatch_command_at,
    parse_sbatch_command_with_env, split_sbatch_args, ArraySpec, Clock, ExclusiveMode, GpuPer,
    GpuRequest, GresFlags, Hint, JobRequest, Licenses, MemoryRequest, NodeSize, OpenMode,
    PartitionDefaults, RequestError, SlurmOptions, TimeLimit, WarnSignal, TOP_PRIORITY,
};
use bursar_gateway::timefmt::parse_zone;
use bursar_pricing::{ClusterPricing, PriceBook, Tres};
use proptest::prelude::*;

const SCRIPT: &str = "#!/bin/bash\nsrun hostname\n";

fn args(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

fn parse(words: &[&str]) -> Result<JobRequest, RequestError> {
    parse_sbatch(&args(words), Some(SCRIPT))
}

fn parse_ok(words: &[&str]) -> JobRequest {
    parse(words).unwrap_or_else(|e| panic!("{words:?}: {e}"))
}

/// What parsing `SCRIPT` with no options gives, changed by `f`.
fn expect(f: fn(&mut JobRequest)) -> JobRequest {
    let mut r = JobRequest {
        script: Some(SCRIPT.to_string()),
        ..JobRequest::default()
    };
    f(&mut r);
    r
}

fn gpus(count: u32, per: GpuPer, kind: Option<&str>) -> Option<GpuRequest> {
    Some(GpuRequest {
        count,
        per,
        kind: kind.map(str::to_string),
    })
}

#[test]
fn every_option_in_every_form() {
    type Case = (&'static [&'static str], fn(&mut JobRequest));
    let cases: &[Case] = &[
        (&[], |_| {}),
        // account / partition / qos, long=, long space, short attached, short space
        (&["--account=physics"], |r| {
            r.account = Some("physics".into())
        }),
        (&["--account", "physics"], |r| {
            r.account = Some("physics".into())
        }),
        (&["-Aphysics"], |r| r.account = Some("physics".into())),
        (&["-A", "physics"], |r| r.account = Some("physics".into())),
        (&["--partition=gpu"], |r| r.partition = Some("gpu".into())),
        (&["-p", "gpu"], |r| r.partition = Some("gpu".into())),
        (&["-pgpu"], |r| r.partition = Some("gpu".into())),
        (&["--qos=high"], |r| r.qos = Some("high".into())),
        (&["-q", "high"], |r| r.qos = Some("high".into())),
        // clusters
        (&["-M", "a,b"], |r| {
            r.clusters = vec!["a".into(), "b".into()]
        }),
        (&["--clusters=a,b,a"], |r| {
            r.clusters = vec!["a".into(), "b".into()]
        }),
        (&["--cluster", "a"], |r| r.clusters = vec!["a".into()]),
        (&["-M", "all"], |_| {}),
        // nodes, tasks, cpus
        (&["-N", "2"], |r| {
            (r.nodes, r.nodes_exact, r.ntasks) = (2, true, 2)
        }),
        (&["--nodes=2"], |r| {
            (r.nodes, r.nodes_exact, r.ntasks) = (2, true, 2)
        }),
        // a range runs at its minimum, pinned
        (&["-N2-4"], |r| {
            (r.nodes, r.nodes_exact, r.ntasks) = (2, true, 2)
        }),
        (&["-N", "1-4", "-n", "8"], |r| {
            (r.nodes, r.nodes_exact, r.ntasks) = (1, true, 8)
        }),
        (&["--nodes", "3-3"], |r| {
            (r.nodes, r.nodes_exact, r.ntasks) = (3, true, 3)
        }),
        // -N 1 is asked for: the job must stay on one node, as sbatch keeps it
        (&["-N", "1", "-n", "8"], |r| {
            (r.nodes, r.nodes_exact, r.ntasks) = (1, true, 8)
        }),
        (&["-n", "8"], |r| r.ntasks = 8),
        (&["--ntasks=8"], |r| r.ntasks = 8),
        (&["-n8"], |r| r.ntasks = 8),
        (&["-N", "4", "-n", "2"], |r| {
            (r.nodes, r.nodes_exact, r.ntasks) = (2, true, 2)
        }),
        (&["-N", "2", "--ntasks-per-node=4"], |r| {
            (r.nodes, r.nodes_exact, r.ntasks, r.ntasks_per_node) = (2, true, 8, Some(4))
        }),
        (&["-n", "3", "--ntasks-per-node", "4"], |r| {
            (r.ntasks, r.ntasks_per_node) = (3, Some(4))
        }),
        // without -N, the nodes the tasks need at --ntasks-per-node each, as Slurm gives them
        (&["-n", "8", "--ntasks-per-node=2"], |r| {
            (r.nodes, r.ntasks, r.ntasks_per_node) = (4, 8, Some(2))
        }),
        (&["-n", "7", "--ntasks-per-node=2"], |r| {
            (r.nodes, r.ntasks, r.ntasks_per_node) = (4, 7, Some(2))
        }),
        // a range: the fewest of it that hold the tasks
        (&["-N", "2-4", "-n", "16", "--ntasks-per-node=4"], |r| {
            (r.nodes, r.nodes_exact, r.ntasks, r.ntasks_per_node) = (4, true, 16, Some(4))
        }),
        (&["-N", "2-8", "-n", "6", "--ntasks-per-node=4"], |r| {
            (r.nodes, r.nodes_exact, r.ntasks, r.ntasks_per_node) = (2, true, 6, Some(4))
        }),
        (&["-c", "4"], |r| {
            (r.cpus_per_task, r.cpus_per_task_given) = (4, true)
        }),
        (&["-c4"], |r| {
            (r.cpus_per_task, r.cpus_per_task_given) = (4, true)
        }),
        (&["--cpus-per-task=4"], |r| {
            (r.cpus_per_task, r.cpus_per_task_given) = (4, true)
        }),
        (&["--cpus-per-task", "4"], |r| {
            (r.cpus_per_task, r.cpus_per_task_given) = (4, true)
        }),
        (&["-c", "1"], |r| r.cpus_per_task_given = true),
        // memory
        (&["--mem=4G"], |r| {
            r.memory = Some(MemoryRequest::PerNode(4096))
        }),
        (&["--mem", "4000"], |r| {
            r.memory = Some(MemoryRequest::PerNode(4000))
        }),
        (&["--mem=4000M"], |r| {
            r.memory = Some(MemoryRequest::PerNode(4000))
        }),
        (&["--mem=1T"], |r| {
            r.memory = Some(MemoryRequest::PerNode(1_048_576))
        }),
        (&["--mem=4GB"], |r| {
            r.memory = Some(MemoryRequest::PerNode(4096))
        }),
        (&["--mem=512k"], |r| {
            r.memory = Some(MemoryRequest::PerNode(1))
        }),
        (&["--mem=0"], |r| r.memory = Some(MemoryRequest::PerNode(0))),
        (&["--mem-per-cpu=2G"], |r| {
            r.memory = Some(MemoryRequest::PerCpu(2048))
        }),
        (&["--mem-per-cpu", "1500"], |r| {
            r.memory = Some(MemoryRequest::PerCpu(1500))
        }),
        // GPUs
        (&["--gres=gpu:a100:2"], |r| {
            r.gpus = gpus(2, GpuPer::PerNode, Some("a100"))
        }),
        (&["--gres", "gpu:2"], |r| {
            r.gpus = gpus(2, GpuPer::PerNode, None)
        }),
        (&["--gres=gpu"], |r| r.gpus = gpus(1, GpuPer::PerNode, None)),
        (&["--gres=gpu:h100"], |r| {
            r.gpus = gpus(1, GpuPer::PerNode, Some("h100"))
        }),
        (&["--gres=gpu:0"], |_| {}),
        (&["--gres=gpu:a100:2,shard:1"], |r| {
            r.gpus = gpus(2, GpuPer::PerNode, Some("a100"));
            r.other_gres = vec!["shard:1".into()];
        }),
        (&["--gres=shard:2"], |r| {
            r.other_gres = vec!["shard:2".into()]
        }),
        (&["--gpus=4"], |r| r.gpus = gpus(4, GpuPer::PerJob, None)),
        (&["-G", "a100:4"], |r| {
            r.gpus = gpus(4, GpuPer::PerJob, Some("a100"))
        }),
        (&["-G4"], |r| r.gpus = gpus(4, GpuPer::PerJob, None)),
        (&["--gpus-per-node=h100:8"], |r| {
            r.gpus = gpus(8, GpuPer::PerNode, Some("h100"))
        }),
        (&["--gpus-per-node", "2"], |r| {
            r.gpus = gpus(2, GpuPer::PerNode, None)
        }),
        // time
        (&["-t", "10"], |r| r.time_limit_min = Some(10)),
        (&["-t10"], |r| r.time_limit_min = Some(10)),
        (&["--time=1-02:30"], |r| r.time_limit_min = Some(1590)),
        (&["--time", "UNLIMITED"], |r| r.time_unlimited = true),
        // names, files, directory
        (&["-J", "my job"], |r| r.job_name = Some("my job".into())),
        (&["--job-name=x"], |r| r.job_name = Some("x".into())),
        (&["-J", "-x"], |r| r.job_name = Some("-x".into())),
        (&["-o", "out-%j.txt"], |r| {
            r.output = Some("out-%j.txt".into())
        }),
        (&["--output=o.txt"], |r| r.output = Some("o.txt".into())),
        (&["-e", "err.txt"], |r| r.error = Some("err.txt".into())),
        (&["--error=err.txt"], |r| r.error = Some("err.txt".into())),
        (&["-D", "/scratch/x"], |r| {
            r.working_dir = Some("/scratch/x".into())
        }),
        (&["--chdir=/scratch/x"], |r| {
            r.working_dir = Some("/scratch/x".into())
        }),
        // recorded and forwarded
        (&["--export=ALL,FOO=bar"], |r| {
            r.export = Some("ALL,FOO=bar".into())
        }),
        (&["--export", "NONE"], |r| r.export = Some("NONE".into())),
        (&["--mail-type=END,FAIL"], |r| {
            r.mail_type = Some("END,FAIL".into())
        }),
        (&["--mail-user", "a@b.c"], |r| {
            r.mail_user = Some("a@b.c".into())
        }),
        (&["--comment=hello world"], |r| {
            r.comment = Some("hello world".into())
        }),
        (&["-C", "skylake"], |r| {
            r.constraint = Some("skylake".into())
        }),
        (&["--constraint=a&b"], |r| r.constraint = Some("a&b".into())),
        (&["--exclusive"], |r| r.exclusive = true),
        (&["-H"], |r| r.hold = true),
        (&["--hold"], |r| r.hold = true),
        (&["-HQ"], |r| r.hold = true),
        // job arrays
        (&["--array=0-9%2"], |r| {
            r.array = Some(ArraySpec::parse("0-9%2").unwrap())
        }),
        (&["--array", "1,3,5-7"], |r| {
            r.array = Some(ArraySpec::parse("1,3,5-7").unwrap())
        }),
        (&["-a0-15:4"], |r| {
            r.array = Some(ArraySpec::parse("0-15:4").unwrap())
        }),
        (&["-Ha", "2"], |r| {
            (r.hold, r.array) = (true, Some(ArraySpec::parse("2").unwrap()))
        }),
        // client flags and ignored chatter leave the job alone
        (
            &[
                "--parsable",
                "-Q",
                "--test-only",
                "-v",
                "--verbose",
                "-Qv",
                "-W",
            ],
            |_| {},
        ),
        // last occurrence wins, as getopt
        (&["-A", "a", "--account=b"], |r| {
            r.account = Some("b".into())
        }),
        (&["--mem=1G", "--mem=2G"], |r| {
            r.memory = Some(MemoryRequest::PerNode(2048))
        }),
    ];
    for (words, change) in cases {
        assert_eq!(parse_ok(words), expect(*change), "{words:?}");
    }
}

#[test]
fn client_flags_and_notes() {
    let command =
        parse_sbatch_command(&args(&["--parsable", "-Qv", "--test-only"]), Some(SCRIPT)).unwrap();
    assert!(command.parsable && command.quiet && command.test_only);
    assert!(!command.wait);
    assert!(command.notes.is_empty());
    // -W/--wait, on the command line or in the script.
    assert!(
        parse_sbatch_command(&args(&["-QW"]), Some(SCRIPT))
            .unwrap()
            .wait
    );
    let waits = "#!/bin/sh\n#SBATCH --wait\ntrue\n";
    assert!(parse_sbatch_command(&[], Some(waits)).unwrap().wait);

    let command = parse_sbatch_command(&args(&["-N", "2-4"]), Some(SCRIPT)).unwrap();
    assert!(command.notes[0].contains("minimum"), "{:?}", command.notes);
    let command = parse_sbatch_command(
        &args(&["--gres=gpu:1,shard:1", "--exclusive"]),
        Some(SCRIPT),
    )
    .unwrap();
    assert_eq!(command.notes.len(), 2, "{:?}", command.notes);
    assert!(command.notes[0].contains("shard:1") && command.notes[0].contains("not priced"));
    assert!(command.notes[1].contains("whole nodes"));

    for help in [&["-h"][..], &["--help"], &["-A", "x", "--usage"]] {
        assert_eq!(parse(help), Err(RequestError::HelpRequested));
    }
    // help needs no script, as in sbatch
    assert_eq!(
        parse_sbatch(&args(&["--help"]), None),
        Err(RequestError::HelpRequested)
    );
}

#[test]
fn time_formats() {
    let minutes: &[(&str, Option<u64>)] = &[
        ("10", Some(10)),
        ("90", Some(90)),
        ("10:00", Some(10)),
        ("10:30", Some(11)),
        ("0:30", Some(1)),
        ("0:01", Some(1)),
        ("1:00:00", Some(60)),
        ("1:00:01", Some(61)),
        ("01:30:00", Some(90)),
        ("1:75:00", Some(135)),
        ("2-0", Some(2880)),
        ("2-12", Some(3600)),
        ("1-2:30", Some(1590)),
        ("1-2:30:15", Some(1591)),
        ("1-00:00:00", Some(1440)),
        ("0-0:0:1", Some(1)),
        ("UNLIMITED", None),
        ("unlimited", None),
        ("INFINITE", None),
        ("Infinite", None),
        ("-1", None),
        ("0", None),
        ("00:00:00", None),
        ("0-0", None),
    ];
    for (text, expected) in minutes {
        assert_eq!(
            TimeLimit::parse(text).map(TimeLimit::minutes),
            Ok(*expected),
            "{text}"
        );
        assert_eq!(
            parse_ok(&["--time", text]).time_limit_min,
            *expected,
            "--time {text}"
        );
    }
    for bad in [
        "",
        "1-",
        "-5",
        "1:2:3:4",
        "1-2-3",
        "1-2:3:4:5",
        "a",
        "1h",
        " 10",
        "10 ",
        "1::2",
        "5:",
        ":5",
        "1.5",
        "+5",
        "99999999999999999999",
        "9999999999",
        "1-:30",
    ] {
        let error = TimeLimit::parse(bad).unwrap_err();
        assert!(
            matches!(&error, RequestError::InvalidValue { option, .. } if option == "--time"),
            "{bad:?}: {error}"
        );
        let error = parse(&["-t", bad]).unwrap_err();
        assert!(
            error.to_string().contains("invalid -t value"),
            "{bad:?}: {error}"
        );
    }
    assert_eq!(TimeLimit::Minutes(1591).to_string(), "1-02:31:00");
    assert_eq!(TimeLimit::Unlimited.to_string(), "UNLIMITED");
    assert_eq!(TimeLimit::parse("1:00:01").unwrap().seconds(), Some(3660));
}

#[test]
fn options_only_slurm_takes_are_read_as_sbatch_reads_them() {
    let slurm = |words: &[&str]| parse_ok(words).slurm;
    let given = slurm(&[
        "--signal=B:USR1@90",
        "--requeue",
        "--open-mode=Append",
        "--nice",
        "--reservation=maint",
        "--wckey=proj",
        "-x",
        "n[1-2]",
        "-i/dev/null",
        "-k",
    ]);
    assert_eq!(
        given.signal.as_ref().map(ToString::to_string).as_deref(),
        Some("B:USR1@90")
    );
    assert_eq!(given.requeue, Some(true));
    assert_eq!(given.open_mode, Some(OpenMode::Append));
    assert_eq!(given.nice, Some(100), "--nice alone is 100, as in sbatch");
    assert_eq!(given.reservation.as_deref(), Some("maint"));
    assert_eq!(given.wckey.as_deref(), Some("proj"));
    assert_eq!(given.exclude.as_deref(), Some("n[1-2]"));
    assert_eq!(given.input.as_deref(), Some("/dev/null"));
    assert!(given.no_kill);
    assert_eq!(slurm(&[]), SlurmOptions::default());
    // The last one wins; --no-kill=off turns it off again.
    let later = slurm(&[
        "--requeue",
        "--no-requeue",
        "-k",
        "--no-kill=off",
        "--nice=-5",
    ]);
    assert_eq!(
        (later.requeue, later.no_kill, later.nice),
        (Some(false), false, Some(-5))
    );
    // The command line wins over the script's lines, option by option.
    let script = "#!/bin/sh\n#SBATCH --no-requeue --signal=TERM@30 -k --wckey=a\ntrue\n";
    let request = parse_sbatch(&args(&["--requeue", "--no-kill=no"]), Some(script)).unwrap();
    assert_eq!(request.slurm.requeue, Some(true));
    assert!(!request.slurm.no_kill);
    assert_eq!(request.slurm.signal.unwrap().to_string(), "TERM@30");
    assert_eq!(request.slurm.wckey.as_deref(), Some("a"));
    // sbatch's variables stand between the two.
    let vars = [("SBATCH_SIGNAL", "USR2@5"), ("SBATCH_NO_REQUEUE", "")];
    let words: Vec<(String, String)> = vars
        .iter()
        .map(|(k, v)| {
            let word = match *k {
                "SBATCH_NO_REQUEUE" => "--no-requeue".to_string(),
                _ => format!("--signal={v}"),
            };
            (k.to_string(), word)
        })
        .collect();
    let command = parse_sbatch_command_with_env(&args(&[]), &words, Some(script)).unwrap();
    assert_eq!(command.request.slurm.signal.unwrap().to_string(), "USR2@5");
    assert_eq!(command.request.slurm.requeue, Some(false));
    // -k takes the rest of its word as its value, as getopt's `k::` (sbatch refuses -kH).
    let off = parse_ok(&["-koff"]);
    assert!(!off.slurm.no_kill);
    assert_eq!(off.output, None, "not -k -o ff");
    assert!(parse(&["-kH"]).is_err());
    assert!(parse_ok(&["-Hk"]).slurm.no_kill);
    let split = split_sbatch_args(&args(&["-koff", "job.sh", "x"])).unwrap();
    assert_eq!(split.script.as_deref(), Some("job.sh"));
    // `none` is /dev/null for the script's input, output and error, as in sbatch.
    let none = parse_ok(&["-i", "none", "-o", "NONE", "--error=None"]);
    assert_eq!(none.slurm.input.as_deref(), Some("/dev/null"));
    assert_eq!(none.output.as_deref(), Some("/dev/null"));
    assert_eq!(none.error.as_deref(), Some("/dev/null"));
    // A file of node names is read by sbatch on the login node: refused, not forwarded.
    assert!(matches!(
        parse(&["-x", "./bad-nodes"]),
        Err(RequestError::InvalidValue { .. })
    ));
    // A dependency names jobs of one cluster: only with that cluster alone.
    let with = slurm(&[
        "-M",
        "onprem",
        "-d",
        "afterok:12:13",
        "--kill-on-invalid-dep=YES",
    ]);
    assert_eq!(with.dependency.as_deref(), Some("afterok:12:13"));
    assert_eq!(with.kill_on_invalid_dep, Some(true));
    for clusters in [&[][..], &["-M", "onprem,cloud"]] {
        let mut words = clusters.to_vec();
        words.push("--dependency=singleton");
        match parse(&words) {
            Err(RequestError::Invalid(why)) => assert!(why.contains("-M CLUSTER"), "{why}"),
            other => panic!("{words:?}: {other:?}"),
        }
    }
    // --propagate: the client's business, not the request's.
    let propagate =
        |words: &[&str]| parse_sbatch_command(&args(words), Some(SCRIPT)).map(|c| c.propagate);
    assert_eq!(propagate(&[]), Ok(None));
    assert_eq!(propagate(&["--propagate"]).unwrap().unwrap().len(), 10);
    assert_eq!(
        propagate(&["--propagate=stack,RLIMIT_NOFILE,STACK"]),
        Ok(Some(vec!["STACK".to_string(), "NOFILE".to_string()]))
    );
    assert_eq!(propagate(&["--propagate=NONE"]), Ok(Some(Vec::new())));
    for bad in [
        &["--signal=USR9"][..],
        &["--signal=X:USR1"],
        &["--open-mode=x"],
        &["--nice=high"],
        &["--nice=2147483646"],
        &["--no-kill=maybe"],
        &["--wckey="],
        &["--propagate=STACK,ALL"],
        &["--propagate=FOO"],
        &["--requeue=yes"],
        &["--kill-on-invalid-dep=maybe"],
        &["-M", "onprem", "--dependency="],
    ] {
        let error = parse_sbatch_command(&args(bad), Some(SCRIPT)).unwrap_err();
        assert!(
            matches!(
                error,
                RequestError::InvalidValue { .. } | RequestError::UnexpectedValue { .. }
            ),
            "{bad:?}: {error}"
        );
    }
}

#[test]
fn begin_deadline_and_time_min_read_as_sbatch_reads_them() {
    // 2026-11-26 20:55:10 in Berlin.
    let clock = Clock {
        now: 1_795_722_910,
        zone: parse_zone("Europe/Berlin").unwrap(),
    };
    let at = |words: &[&str], script: &str| {
        parse_sbatch_command_at(&args(words), &[], Some(script), &clock)
    };
    let command = at(
        &["-b", "now+1hour", "--deadline=tomorrow", "--time-min=30"],
        SCRIPT,
    )
    .unwrap();
    let slurm = &command.request.slurm;
    assert_eq!(slurm.begin, Some(clock.now + 3_600));
    // 2026-11-27 00:00 in Berlin.
    assert_eq!(slurm.deadline, Some(1_795_734_000));
    assert_eq!(slurm.time_min, Some(30));
    assert!(
        command
            .notes
            .contains(&"--begin=now+1hour: the job waits until 2026-11-26 21:55:10 +01:00".into()),
        "{:?}",
        command.notes
    );
    assert!(command.notes.iter().any(|n| n.starts_with(
        "--deadline=tomorrow: Slurm ends the job unstarted if it cannot end by 2026-11-27 00:00:00"
    )));
    // From the script, the command line winning; a time alone is the next such time.
    let script =
        "#!/bin/sh\n#SBATCH --begin=22:00 --time-min=1:00:00 --deadline=2026-12-01T18:00\ntrue\n";
    let from_script = at(&["--begin=teatime"], script).unwrap().request.slurm;
    assert_eq!(from_script.begin, Some(1_795_791_600), "tomorrow 16:00");
    assert_eq!(from_script.time_min, Some(60));
    assert_eq!(from_script.deadline, Some(1_796_144_400));
    assert_eq!(
        at(&[], script).unwrap().request.slurm.begin,
        Some(1_795_726_800),
        "today 22:00"
    );
    // What sbatch refuses, and what slurmctld would.
    for (words, has) in [
        (&["--begin=10pm"][..], "invalid --begin value"),
        (&["--begin=02/30"], "2027-02-30 is not a day"),
        (&["--deadline=soon"], "invalid --deadline value"),
        (&["--time-min=0"], "needs a length"),
        (&["--time-min=UNLIMITED"], "needs a length"),
        (&["--time-min=x"], "invalid --time-min value"),
        (
            &["-t", "10", "--time-min=11"],
            "--time-min 00:11:00 is longer than the time limit",
        ),
        (
            &["--begin=uts2000000000", "--deadline=uts1999999999"],
            "is not after --begin",
        ),
        (&["--begin=uts999999"], "invalid --begin value"),
    ] {
        let error = at(words, SCRIPT).unwrap_err().to_string();
        assert!(error.contains(has), "{words:?}: {error}");
    }
    // JSON: Unix seconds, or RFC 3339 on the way in; a dstack cluster takes none of them.
    let json: JobRequest = serde_json::from_str(
        r#"{"slurm": {"begin": "2026-12-01T18:00:00+01:00", "deadline": 1800000000, "time_min": 5}}"#,
    )
    .unwrap();
    assert_eq!(json.slurm.begin, Some(1_796_144_400));
    assert_eq!(json.slurm.deadline, Some(1_800_000_000));
    assert_eq!(
        serde_json::to_value(&json.slurm).unwrap(),
        serde_json::json!({"begin": 1_796_144_400, "deadline": 1_800_000_000, "time_min": 5})
    );
    assert_eq!(json.slurm.given(), ["--begin", "--deadline", "--time-min"]);
    // --tmp in --mem's sizes, --prefer as written; the command line wins.
    let script = "#!/bin/sh\n#SBATCH --tmp=2G --prefer=skylake\ntrue\n";
    let slurm = at(&["--prefer=ib&skylake"], script).unwrap().request.slurm;
    assert_eq!(slurm.tmp_mb, Some(2048));
    assert_eq!(slurm.prefer.as_deref(), Some("ib&skylake"));
    for bad in [&["--tmp=lots"][..], &["--prefer="], &["--tmp=5P"]] {
        assert!(at(bad, SCRIPT).is_err(), "{bad:?}");
    }
}

#[test]
fn a_node_list_runs_the_job_on_at_least_its_nodes_as_sbatch_does() {
    let on = |words: &[&str]| {
        let r = parse_ok(words);
        (r.nodes, r.nodes_exact, r.ntasks, r.slurm.nodelist)
    };
    assert_eq!(
        on(&["-w", "n[1-3]"]),
        (3, true, 3, Some("n[1-3]".to_string())),
        "one task per node, as sbatch"
    );
    assert_eq!(on(&["-w", "n[1-2]", "-n", "6"]).0, 2);
    assert_eq!(
        on(&["-N", "4", "--nodelist=n[1-2]"]).0,
        4,
        "-N asks for more"
    );
    assert_eq!(
        on(&["-N", "1-5", "-w", "n[1-3]"]).0,
        3,
        "a range's minimum raised"
    );
    let script = "#!/bin/sh\n#SBATCH -w n1\ntrue\n";
    let from_script = parse_sbatch(&args(&["-w", "n[1-2]"]), Some(script)).unwrap();
    assert_eq!(from_script.nodes, 2, "the command line wins");
    // Fewer tasks than names: as many names as tasks, the first in Slurm's order.
    let fewer = parse_sbatch_command(&args(&["-w", "n[3,1-2]", "-n", "2"]), Some(SCRIPT)).unwrap();
    assert_eq!(fewer.request.slurm.nodelist.as_deref(), Some("n1,n2"));
    assert_eq!((fewer.request.nodes, fewer.request.ntasks), (2, 2));
    assert!(
        fewer
            .notes
            .iter()
            .any(|n| n.contains("the job runs on n1,n2")),
        "{:?}",
        fewer.notes
    );
    // Priced for the nodes: at least one CPU on each.
    assert_eq!(parse_ok(&["-w", "n[1-3]", "-n", "3"]).cpus(), 3);
    for (words, has) in [
        (&["-w", "./hosts"][..], "a file of node names"),
        (&["-w", "n[1-"], "without its"),
        (&["-w", "r[1-2]n[1-2]"], "one bracketed range"),
        (&["-w", "n[1-2],n2"], "names n2 twice"),
        (&["-w", "feature{gpu}"], "host list functions"),
        (&["-N", "2", "-w", "n[1-4]"], "allows at most 2"),
    ] {
        let error = parse(words).unwrap_err().to_string();
        assert!(error.contains(has), "{words:?}: {error}");
    }
    // In JSON the node count must cover the list, as the client makes it.
    let short: JobRequest =
        serde_json::from_value(serde_json::json!({"slurm": {"nodelist": "n[1-2]"}})).unwrap();
    let error = short.validate().unwrap_err().to_string();
    assert!(error.contains("give -N 2"), "{error}");
    let covered: JobRequest =
        serde_json::from_value(serde_json::json!({"nodes": 2, "slurm": {"nodelist": "n[1-2]"}}))
            .unwrap();
    assert!(covered.validate().is_ok());
    assert!(serde_json::from_str::<JobRequest>(r#"{"slurm": {"begin": "tomorrow"}}"#).is_err());
    let too_early: JobRequest = serde_json::from_str(r#"{"slurm": {"begin": 5}}"#).unwrap();
    assert!(too_early.validate().is_err());
}

/// `--ntasks-per-gpu`: the tasks from the GPUs or the GPUs from the tasks, as slurmctld's
/// `gres_job_state_validate` counts them (22.05.8 and 24.11.5 live: `--gpus=2
/// --ntasks-per-gpu=2` runs 4 tasks; `-n 4 --ntasks-per-gpu=2` gets 2 GPUs; `-n 3` is refused).
#[test]
fn tasks_per_gpu_as_slurm_counts_them() {
    let shape = |words: &[&str]| {
        let r = parse_ok(words);
        (r.ntasks, r.nodes, r.gpus.clone(), r.gpus_from_tasks)
    };
    let job_gpus = |count| gpus(count, GpuPer::PerJob, None);
    // GPUs given: GPUs × N tasks
    assert_eq!(
        shape(&["--gpus=2", "--ntasks-per-gpu=2"]),
        (4, 1, job_gpus(2), false)
    );
    assert_eq!(
        shape(&["--gpus=a100:3", "--ntasks-per-gpu=1"]),
        (3, 1, gpus(3, GpuPer::PerJob, Some("a100")), false)
    );
    assert_eq!(
        shape(&["--gres=gpu:2", "--ntasks-per-gpu=3"]),
        (6, 1, gpus(2, GpuPer::PerNode, None), false)
    );
    assert_eq!(
        shape(&["-N", "2", "--gpus-per-node=2", "--ntasks-per-gpu=1"]),
        (4, 2, gpus(2, GpuPer::PerNode, None), false)
    );
    // no GPUs: a GPU for every N tasks, from -n or -N × N
    assert_eq!(
        shape(&["-n", "8", "--ntasks-per-gpu=2"]),
        (8, 1, job_gpus(4), true)
    );
    assert_eq!(
        shape(&["-N", "2", "--ntasks-per-gpu=2"]),
        (4, 2, job_gpus(2), true)
    );
    // -n beside GPUs is replaced, as Slurm replaces it, with a note
    let command = parse_sbatch_command(
        &args(&["-n", "1", "--gpus=2", "--ntasks-per-gpu=2"]),
        Some(SCRIPT),
    )
    .unwrap();
    assert_eq!(command.request.ntasks, 4);
    assert!(
        command
            .notes
            .iter()
            .any(|n| n.contains("--ntasks=1") && n.contains("makes 4 tasks")),
        "{:?}",
        command.notes
    );
    // the script's value, the command line's over it
    let script = "#!/bin/sh\n#SBATCH --ntasks-per-gpu=4\n#SBATCH --gpus=1\ntrue\n";
    let r = parse_sbatch(&args(&["--ntasks-per-gpu=2"]), Some(script)).unwrap();
    assert_eq!((r.ntasks, r.ntasks_per_gpu), (2, Some(2)));
    // priced: a CPU per task (× -c) and the GPUs
    let r = parse_ok(&["-c", "2", "--gpus=1", "--ntasks-per-gpu=2"]);
    assert_eq!((r.cpus(), r.total_gpus()), (4, 1));
    let r = parse_ok(&["-n", "8", "--ntasks-per-gpu=2"]);
    assert_eq!((r.cpus(), r.total_gpus()), (8, 4));
    // the partition's DefCpuPerGPU gives way to the tasks' CPUs, as in cons_tres
    let defaults = PartitionDefaults {
        cpus_per_gpu: Some(8),
        ..PartitionDefaults::default()
    };
    let r = parse_ok(&["--gpus=2", "--ntasks-per-gpu=2"]);
    assert_eq!(r.cpus_with(&defaults), 4);
    assert_eq!(parse_ok(&["--gpus=2", "-n", "4"]).cpus_with(&defaults), 16);

    let refused = |words: &[&str], has: &str| match parse(words) {
        Err(e) => assert!(e.to_string().contains(has), "{words:?}: {e}"),
        Ok(r) => panic!("{words:?} accepted: {r:?}"),
    };
    refused(&["--ntasks-per-gpu=2"], "needs GPUs");
    refused(
        &["-n", "3", "--ntasks-per-gpu=2"],
        "multiple of --ntasks-per-gpu",
    );
    refused(
        &["-n", "1", "--ntasks-per-gpu=2"],
        "multiple of --ntasks-per-gpu",
    );
    refused(
        &["--ntasks-per-gpu=0", "--gpus=1"],
        "--ntasks-per-gpu must be at least 1",
    );
    refused(
        &["--ntasks-per-gpu=0", "-n", "2"],
        "--ntasks-per-gpu must be at least 1",
    );
    refused(&["--ntasks-per-gpu=65534", "--gpus=1"], "at most 65533");
    refused(&["--ntasks-per-gpu=x", "--gpus=1"], "not a whole number");
    refused(
        &["--ntasks-per-gpu=1", "--gpus-per-task=1", "-n", "2"],
        "mutually exclusive",
    );
    refused(
        &["--ntasks-per-gpu=1", "--gpus=2", "--ntasks-per-node=1"],
        "mutually exclusive",
    );
    refused(
        &["--ntasks-per-gpu=1", "--gpus=2", "-N", "1-2"],
        "without a range",
    );
    // on -N nodes, the same tasks on each, a multiple of N
    refused(
        &["-N", "2", "--gpus=3", "--ntasks-per-gpu=2"],
        "a multiple of 4",
    );
    refused(
        &["-N", "2", "-n", "6", "--ntasks-per-gpu=2"],
        "a multiple of 4",
    );
    refused(
        &["-N", "3", "--gpus=2", "--ntasks-per-gpu=1"],
        "a multiple of 3",
    );
    // -n below -N lowers the nodes first, as sbatch does
    assert_eq!(
        shape(&[
            "-N",
            "2",
            "-n",
            "1",
            "--gpus-per-node=1",
            "--ntasks-per-gpu=1"
        ]),
        (1, 1, gpus(1, GpuPer::PerNode, None), false)
    );

    // JSON: the same derivation, and a task count that disagrees with the GPUs refused (the
    // API takes what it is sent; sbatch's -n is replaced, as Slurm replaces it).
    let json = |text: &str| serde_json::from_str::<JobRequest>(text).unwrap();
    let r = json(r#"{"ntasks": 6, "ntasks_per_gpu": 3}"#);
    assert_eq!((r.ntasks, r.total_gpus(), r.gpus_from_tasks), (6, 2, true));
    assert!(r.validate().is_ok());
    let r = json(r#"{"gpus": {"count": 2, "per": "job"}, "ntasks_per_gpu": 3}"#);
    assert_eq!((r.ntasks, r.total_gpus(), r.gpus_from_tasks), (6, 2, false));
    assert!(r.validate().is_ok());
    let r = json(r#"{"nodes": 2, "gpus": {"count": 1}, "ntasks_per_gpu": 2}"#);
    assert_eq!((r.ntasks, r.total_gpus()), (4, 2));
    assert!(r.validate().is_ok());
    for (text, has) in [
        (
            r#"{"ntasks": 3, "gpus": {"count": 2, "per": "job"}, "ntasks_per_gpu": 3}"#,
            "makes 6 tasks, and -n asks for 3",
        ),
        (r#"{"ntasks_per_gpu": 3}"#, "needs GPUs"),
        // sent on two nodes all the same
        (
            r#"{"nodes": 2, "nodes_exact": false, "ntasks": 6, "ntasks_per_gpu": 2}"#,
            "a multiple of 4",
        ),
        (r#"{"ntasks": 4, "ntasks_per_gpu": 3}"#, "multiple"),
        (
            r#"{"ntasks": 2, "gpus": {"count": 1, "per": "task"}, "ntasks_per_gpu": 2}"#,
            "mutually exclusive",
        ),
    ] {
        let error = json(text).validate().unwrap_err();
        assert!(error.to_string().contains(has), "{text}: {error}");
    }

    // Both ways back: #SBATCH lines and JSON (derived GPUs left out of both).
    for words in [
        &["--gpus=2", "--ntasks-per-gpu=2"][..],
        &["-n", "8", "--ntasks-per-gpu=2"],
        &["-N", "2", "--gpus-per-node=1", "--ntasks-per-gpu=3"],
        &["-N", "2", "--ntasks-per-gpu=2"],
    ] {
        let r = parse_ok(words);
        let lines = r.to_sbatch_lines();
        assert_eq!(
            lines.iter().any(|l| l.starts_with("#SBATCH --gpus")),
            !r.gpus_from_tasks,
            "{lines:?}"
        );
        let script = format!("#!/bin/sh\n{}\n{}", lines.join("\n"), "true\n");
        let again = parse_sbatch(&[], Some(&script)).unwrap();
        assert_eq!(
            (
                again.ntasks,
                again.nodes,
                &again.gpus,
                again.gpus_from_tasks
            ),
            (r.ntasks, r.nodes, &r.gpus, r.gpus_from_tasks),
            "{words:?}: {lines:?}"
        );
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json.get("gpus").is_some(), !r.gpus_from_tasks, "{json}");
        let back: JobRequest = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(back, r, "{json}");
    }
}

/// `--profile`, `--switches`, `--container`, `--container-id`: checked as sbatch reads them
/// (stricter where Slurm would misread a typo), kept as given for the forwarder.
#[test]
fn profiles_switches_and_containers_as_sbatch_reads_them() {
    use bursar_gateway::request::{parse_profile, parse_switches, Switches};
    let profile = |text: &str| parse_profile(text).map(|p| p.as_slurm());
    assert_eq!(profile("task").as_deref(), Ok("Task"));
    assert_eq!(profile("Task,ENERGY").as_deref(), Ok("Energy,Task"));
    assert_eq!(profile("network,lustre").as_deref(), Ok("Lustre,Network"));
    assert_eq!(profile("all").as_deref(), Ok("Energy,Lustre,Network,Task"));
    assert_eq!(
        profile("All,task").as_deref(),
        Ok("Energy,Lustre,Network,Task")
    );
    assert_eq!(profile("None").as_deref(), Ok("None"));
    for bad in ["", "install", "energy,", "none,task", "energy task", "gpu"] {
        assert!(parse_profile(bad).is_err(), "{bad:?}");
    }
    let switches = |text: &str| parse_switches(text);
    let sw = |count, wait_seconds| {
        Ok(Switches {
            count,
            wait_seconds,
        })
    };
    assert_eq!(switches("1"), sw(1, None));
    // a bare number is minutes, as Slurm's time_str2secs reads it
    assert_eq!(switches("2@10"), sw(2, Some(600)));
    assert_eq!(switches("2@1:30"), sw(2, Some(90)));
    assert_eq!(switches("2@1:00:00"), sw(2, Some(3600)));
    assert_eq!(switches("2@1-2"), sw(2, Some(93_600)));
    assert_eq!(switches("4@0"), sw(4, Some(0)));
    assert_eq!(switches("4@UNLIMITED"), sw(4, None));
    for bad in [
        "",
        "0",
        "-1",
        "+2",
        "2@",
        "2@soon",
        "2@1h",
        "x@10",
        "2147483648",
    ] {
        assert!(switches(bad).is_err(), "{bad:?}");
    }

    let r = parse_ok(&[
        "--profile=energy,task",
        "--switches=2@5:00",
        "--container=/srv/oci/py",
        "--container-id=py-1",
    ]);
    assert_eq!(r.slurm.profile.as_deref(), Some("energy,task"));
    assert_eq!(r.slurm.switches.as_deref(), Some("2@5:00"));
    assert_eq!(r.slurm.container.as_deref(), Some("/srv/oci/py"));
    assert_eq!(r.slurm.container_id.as_deref(), Some("py-1"));
    assert_eq!(r.alloc(), parse_ok(&[]).alloc(), "not priced");
    slurm_options_round_trip(
        &r,
        &["--profile", "--switches", "--container", "--container-id"],
        serde_json::json!({"profile": "energy,task", "switches": "2@5:00",
            "container": "/srv/oci/py", "container_id": "py-1"}),
    );
    for (words, has) in [
        (&["--profile=install"][..], "not a profile"),
        (&["--switches=0"], "not a switch count"),
        (&["--switches=2@soon"], "the wait \"soon\""),
        (&["--container="], "must not be empty"),
    ] {
        let error = parse(words).unwrap_err();
        assert!(error.to_string().contains(has), "{words:?}: {error}");
    }
    // JSON is checked alike
    let bad: JobRequest = serde_json::from_str(r#"{"slurm": {"profile": "gpu"}}"#).unwrap();
    assert!(bad.validate().is_err());
    let bad: JobRequest = serde_json::from_str(r#"{"slurm": {"container": "a\nb"}}"#).unwrap();
    assert!(bad.validate().is_err());
}

#[test]
fn refuses_what_it_cannot_carry() {
    let unsupported = |words: &[&str], option: &str, reason_has: &str| match parse(words) {
        Err(RequestError::UnsupportedOption { option: o, reason }) => {
            assert_eq!(o, option, "{words:?}");
            assert!(reason.contains(reason_has), "{words:?}: {reason}");
        }
        other => panic!("{words:?}: {other:?}"),
    };
    // refused with reasons of their own, the short form too
    unsupported(&["--overcommit"], "--overcommit", "cannot price it alike");
    unsupported(&["-O"], "-O", "cannot price it alike");
    unsupported(
        &["-n", "4", "-O"],
        "-O",
        "OpenAPI v0.0.38 (Slurm 22.05 and 23.02) refuses it",
    );
    unsupported(&["--reboot"], "--reboot", "only its administrators");
    unsupported(&["-S", "2"], "-S", "not supported");
    unsupported(&["-B", "2:4"], "-B", "not supported");
    unsupported(&["--bogus"], "--bogus", "not supported");
    unsupported(&["--accou=physics"], "--accou", "did you mean --account");
    // ambiguous (--account, --acctg-freq), as in sbatch
    unsupported(&["--acc=physics"], "--acc", "not supported");
    unsupported(
        &["--ntasks-per-tres=1"],
        "--ntasks-per-tres",
        "use --ntasks-per-gpu",
    );
    unsupported(
        &["--gpus-per-socket=1"],
        "--gpus-per-socket",
        "GPU-relative",
    );
    unsupported(&["-Qy"], "-y", "not supported");

    assert_eq!(
        parse(&["--parsable=yes"]),
        Err(RequestError::UnexpectedValue {
            option: "--parsable".into(),
            value: "yes".into()
        })
    );
    assert_eq!(
        parse(&["-A"]),
        Err(RequestError::MissingValue {
            option: "-A".into()
        })
    );
    assert_eq!(
        parse(&["--time"]),
        Err(RequestError::MissingValue {
            option: "--time".into()
        })
    );
    assert_eq!(
        parse(&["-A", "x", "job.sh"]),
        Err(RequestError::UnexpectedArgument("job.sh".into()))
    );
    assert!(matches!(
        parse(&["--"]),
        Err(RequestError::UnexpectedArgument(_))
    ));

    let invalid = |words: &[&str], has: &str| {
        let error = parse(words).unwrap_err();
        assert!(error.to_string().contains(has), "{words:?}: {error}");
    };
    invalid(&["--mem=1.5G"], "invalid --mem value \"1.5G\"");
    invalid(&["--mem=4X"], "invalid --mem value");
    invalid(&["--mem="], "invalid --mem value");
    invalid(&["-N", "4-2"], "minimum is above the maximum");
    invalid(&["-N", "2k"], "not a whole number");
    invalid(&["-N", "0"], "--nodes must be at least 1");
    invalid(&["-n", "0"], "--ntasks must be at least 1");
    invalid(&["-c", "0"], "--cpus-per-task must be at least 1");
    invalid(
        &["--cpus-per-task=x"],
        "invalid --cpus-per-task value \"x\"",
    );
    invalid(&["--gres=gpu:a100:x"], "invalid --gres value");
    invalid(&["--gres=gpu:a100:1,gpu:v100:1"], "one GPU type per job");
    invalid(&["--gpus=a100:1,v100:1"], "one GPU type per job");
    invalid(&["--gpus=a100"], "not a whole number");
    invalid(&["--gpus-per-node=a/b:1"], "unknown GPU type");
    invalid(&["-A", ""], "must not be empty");
    invalid(&["-A", "two words"], "not a valid name");
    invalid(&["-M", "a,,b"], "cluster name is empty");
    invalid(&["-M", "all,a"], "`all` cannot be combined");
    invalid(
        &["--array=5-2"],
        "invalid --array value \"5-2\": the range ends (2) before it starts (5)",
    );
    invalid(
        &["-a", "0-9%0"],
        "invalid -a value \"0-9%0\": %0 sets no limit",
    );
    invalid(&["-a", "4000001"], "is above 4000000");
    invalid(&["--array="], "invalid --array value \"\": no task indexes");

    assert_eq!(
        parse(&["--mem=1G", "--mem-per-cpu=1G"]),
        Err(RequestError::Conflict {
            first: "--mem".into(),
            second: "--mem-per-cpu".into()
        })
    );
    assert_eq!(
        parse(&["--gres=gpu:2", "--gpus=2"]),
        Err(RequestError::Conflict {
            first: "--gres=gpu".into(),
            second: "--gpus".into()
        })
    );
}

#[test]
fn script_directives_and_precedence() {
    let script = "#!/bin/bash
# a comment

#SBATCH -A chem
#SBATCH --time=10 --job-name=\"from script\"   # trailing comment
   # an indented comment
#SBATCH --mem-per-cpu=1G
#SBATCH --gres=gpu:v100:1,shard:1
#SBATCH -p batch
#SBATCH -p debug
##SBATCH --qos=ignored
  #SBATCH --qos=ignored-too
srun hostname
#SBATCH --comment=after-the-first-command
";
    let from_script = parse_sbatch(&[], Some(script)).unwrap();
    assert_eq!(from_script.account.as_deref(), Some("chem"));
    assert_eq!(from_script.time_limit_min, Some(10));
    assert_eq!(from_script.job_name.as_deref(), Some("from script"));
    assert_eq!(from_script.memory, Some(MemoryRequest::PerCpu(1024)));
    assert_eq!(from_script.gpus, gpus(1, GpuPer::PerNode, Some("v100")));
    assert_eq!(from_script.other_gres, vec!["shard:1".to_string()]);
    assert_eq!(from_script.partition.as_deref(), Some("debug"));
    assert_eq!(from_script.qos, None);
    assert_eq!(from_script.comment, None);
    assert_eq!(from_script.script.as_deref(), Some(script));

    // the command line wins, option by option
    let cli = args(&["-A", "physics", "--mem=8G", "-t", "1:00:00"]);
    let merged = parse_sbatch(&cli, Some(script)).unwrap();
    assert_eq!(merged.account.as_deref(), Some("physics"));
    assert_eq!(merged.memory, Some(MemoryRequest::PerNode(8192)));
    assert_eq!(merged.time_limit_min, Some(60));
    assert_eq!(merged.job_name.as_deref(), Some("from script"));
    assert_eq!(merged.gpus, gpus(1, GpuPer::PerNode, Some("v100")));

    // a GPU option on the command line replaces the script's GPUs but keeps its other GRES
    let merged = parse_sbatch(&args(&["--gpus=2"]), Some(script)).unwrap();
    assert_eq!(merged.gpus, gpus(2, GpuPer::PerJob, None));
    assert_eq!(merged.other_gres, vec!["shard:1".to_string()]);
    // a command-line --gres replaces the script's --gres entirely, as in sbatch
    let merged = parse_sbatch(&args(&["--gres=nvme:1"]), Some(script)).unwrap();
    assert_eq!(merged.gpus, None);
    assert_eq!(merged.other_gres, vec!["nvme:1".to_string()]);
    // conflicting memory options in different places are no conflict: the command line wins
    let merged = parse_sbatch(&args(&["--mem-per-cpu=3G"]), Some(script)).unwrap();
    assert_eq!(merged.memory, Some(MemoryRequest::PerCpu(3072)));

    // #SLURM lines are read too, with a note
    let command = parse_sbatch_command(&[], Some("#!/bin/sh\n#SLURM -J old\necho\n")).unwrap();
    assert_eq!(command.request.job_name.as_deref(), Some("old"));
    assert!(command.notes[0].contains("#SLURM"));

    // quoting and escapes, as sbatch's tokenizer
    let r = parse_sbatch(
        &[],
        Some("#!/bin/sh\n#SBATCH --comment='a \"quoted\" #word' -J \\#x\n"),
    )
    .unwrap();
    assert_eq!(r.comment.as_deref(), Some("a \"quoted\" #word"));
    assert_eq!(r.job_name.as_deref(), Some("#x"));
}

#[test]
fn script_errors_name_the_line() {
    let error =
        parse_sbatch(&[], Some("#!/bin/sh\n#SBATCH -J ok\n#SBATCH --bogus=1\n")).unwrap_err();
    assert!(
        matches!(error, RequestError::ScriptLine { line: 3, .. }),
        "{error:?}"
    );
    assert!(
        error.to_string().starts_with("job script line 3: --bogus"),
        "{error}"
    );

    let cases: &[(&str, &str)] = &[
        ("#!/bin/sh\n#SBATCH -J \"open\n", "line 2: unmatched `\"`"),
        ("#!/bin/sh\n#SBATCH : -N 2\n", "line 2: unexpected `:`"),
        (
            "#!/bin/sh\n#SBATCH hetjob\n",
            "line 2: hetjob: heterogeneous",
        ),
        (
            "#!/bin/sh\n#SBATCH --wrap=hostname\n",
            "line 2: --wrap: --wrap belongs",
        ),
        ("#!/bin/sh\n#SBATCH stray\n", "line 2: stray: not an option"),
        ("#!/bin/sh\n#SBATCHX\n", "line 2: X: not an option"),
        ("#!/bin/sh\n#SBATCH -t\n", "line 2: -t needs a value"),
        (
            "#!/bin/sh\n#SBATCH --array=1-4:0\n",
            "line 2: invalid --array value \"1-4:0\": the step must be at least 1",
        ),
        (
            "#!/bin/sh\n#SBATCH --mem=1G\n#SBATCH --mem-per-cpu=1G\n",
            "--mem and --mem-per-cpu are mutually exclusive",
        ),
    ];
    for (script, has) in cases {
        let error = parse_sbatch(&[], Some(script)).unwrap_err();
        assert!(error.to_string().contains(has), "{script:?}: {error}");
    }
}

#[test]
fn shebang_rule() {
    let shebang = "This does not look like a batch script.  The first line must start with #! \
                   followed by the path to an interpreter.  For instance: #!/bin/sh";
    assert_eq!(
        parse_sbatch(&[], Some("echo hi\n")),
        Err(RequestError::Script(shebang.into()))
    );
    assert_eq!(
        parse_sbatch(&[], Some("\n#!/bin/sh\necho hi\n")),
        Err(RequestError::Script(shebang.into()))
    );
    assert_eq!(
        parse_sbatch(&[], Some(" #!/bin/sh\n")),
        Err(RequestError::Script(shebang.into()))
    );
    for (script, has) in [
        ("", "empty"),
        ("  \n\t\n", "only whitespace"),
        ("#!/bin/sh\r\necho\r\n", "DOS line breaks"),
        ("#!/bin/sh\necho \0\n", "NUL"),
    ] {
        let error = parse_sbatch(&[], Some(script)).unwrap_err();
        assert!(error.to_string().contains(has), "{script:?}: {error}");
    }
    // --wrap needs no script, and no shebang
    let wrapped = parse_sbatch(&args(&["--wrap=hostname -f", "-A", "x"]), None).unwrap();
    assert_eq!(wrapped.wrap.as_deref(), Some("hostname -f"));
    assert_eq!(wrapped.script, None);
    let script = wrapped.batch_script().unwrap();
    assert!(script.starts_with("#!/bin/sh\n") && script.ends_with("\nhostname -f\n"));
    assert!(parse_sbatch(&args(&["--wrap", "hostname"]), None).is_ok());
    // but not both, and not neither
    let error = parse_sbatch(&args(&["--wrap=hostname"]), Some(SCRIPT)).unwrap_err();
    assert!(
        error.to_string().contains("--wrap cannot be used together"),
        "{error}"
    );
    let error = parse_sbatch(&[], None).unwrap_err();
    assert!(error.to_string().contains("no job script"), "{error}");
}

#[test]
fn alloc_prices_what_slurm_allocates() {
    let r = parse_ok(&[
        "-N",
        "2",
        "-n",
        "8",
        "-c",
        "2",
        "--mem-per-cpu=2G",
        "--gres=gpu:a100:2",
    ]);
    assert_eq!(
        r.alloc(),
        Tres::parse("cpu=16,mem=32768M,node=2,gres/gpu=4,gres/gpu:a100=4").unwrap()
    );

    let cases: &[(&[&str], &str)] = &[
        (&[], "cpu=1,node=1"),
        (&["-N", "2"], "cpu=2,node=2"),
        (&["-N", "2", "-c", "4"], "cpu=8,node=2"),
        (&["-n", "4", "-c", "2"], "cpu=8,node=1"),
        (&["-N", "2", "--mem=4G"], "cpu=2,mem=8G,node=2"),
        (&["-n", "3", "--mem-per-cpu=1000"], "cpu=3,mem=3000M,node=1"),
        (&["-N", "2", "--gpus=3"], "cpu=2,node=2,gres/gpu=3"),
        (
            &["-N", "2", "--gpus-per-node=H100:4"],
            "cpu=2,node=2,gres/gpu=8,gres/gpu:h100=8",
        ),
        (
            &["-N", "3", "--gres=gpu:1,shard:2"],
            "cpu=3,node=3,gres/gpu=3",
        ),
        (
            &["-N", "2", "--ntasks-per-node=4", "-c", "2"],
            "cpu=16,node=2",
        ),
        (&["--mem=0"], "cpu=1,node=1"),
        // GPU-relative shapes, as 24.11's ReqTRES gives them
        (
            &[
                "-n",
                "2",
                "-c",
                "2",
                "--gpus-per-task=1",
                "--mem-per-gpu=500",
            ],
            "cpu=4,mem=1000M,node=1,gres/gpu=2",
        ),
        (
            &["-n", "2", "--gpus=2", "--cpus-per-gpu=3"],
            "cpu=6,node=1,gres/gpu=2",
        ),
        (
            &["-n", "4", "--gpus-per-task=H100:1", "--mem-per-gpu=10G"],
            "cpu=4,mem=40G,node=1,gres/gpu=4,gres/gpu:h100=4",
        ),
        (
            &["-N", "2", "--gpus-per-node=2", "--cpus-per-gpu=4"],
            "cpu=16,node=2,gres/gpu=4",
        ),
        // tasks' CPUs when they are more than the GPUs'
        (
            &["-n", "8", "--gpus=1", "--cpus-per-gpu=2"],
            "cpu=8,node=1,gres/gpu=1",
        ),
    ];
    for (words, tres) in cases {
        assert_eq!(
            parse_ok(words).alloc(),
            Tres::parse(tres).unwrap(),
            "{words:?}"
        );
    }

    // DefMemPerCPU applies only when no memory was asked for
    let r = parse_ok(&["-n", "4"]);
    assert_eq!(r.alloc_with_default_mem(Some(1000)).mem_mb(), 4000);
    let r = parse_ok(&["-n", "4", "--mem=1G"]);
    assert_eq!(r.alloc_with_default_mem(Some(1000)).mem_mb(), 1024);
    assert!(r.memory.is_some_and(|m| !m.is_whole_node()));
    assert!(parse_ok(&["--mem=0"]).memory.unwrap().is_whole_node());
    // A partition's GPU defaults, as cons_tres applies them: CPUs per GPU without -c or
    // --cpus-per-gpu, memory per GPU (over DefMemPerCPU) without any memory option.
    let defaults = PartitionDefaults {
        mem_per_cpu_mb: Some(1000),
        mem_per_gpu_mb: Some(4000),
        cpus_per_gpu: Some(8),
        ..PartitionDefaults::default()
    };
    let with = |words: &[&str]| parse_ok(words).alloc_with_defaults(&defaults);
    assert_eq!(
        with(&["-n", "2", "--gpus-per-task=1"]),
        Tres::parse("cpu=16,mem=8000M,node=1,gres/gpu=2").unwrap()
    );
    assert_eq!(
        with(&[
            "-n",
            "2",
            "-c",
            "2",
            "--gpus-per-task=1",
            "--mem-per-cpu=100"
        ]),
        Tres::parse("cpu=4,mem=400M,node=1,gres/gpu=2").unwrap()
    );
    assert_eq!(
        with(&["--gpus=1", "--cpus-per-gpu=2", "--mem=1G"]),
        Tres::parse("cpu=2,mem=1G,node=1,gres/gpu=1").unwrap()
    );
    assert_eq!(
        with(&["-n", "3"]),
        Tres::parse("cpu=3,mem=3000M,node=1").unwrap(),
        "no GPUs: DefMemPerCPU"
    );
    // With --cpus-per-gpu, DefMemPerCPU counts the CPUs the GPUs bring (24.11: mem=6000M).
    let r = parse_ok(&["-n", "2", "--gpus=2", "--cpus-per-gpu=3"]);
    assert_eq!(r.alloc_with_default_mem(Some(1000)).mem_mb(), 6000);
}

#[test]
fn gpu_relative_options_follow_sbatch() {
    let r = parse_ok(&["-n", "4", "--gpus-per-task=a100:2", "--mem-per-gpu=8G"]);
    assert_eq!(
        r.gpus,
        Some(GpuRequest {
            count: 2,
            per: GpuPer::PerTask,
            kind: Some("a100".into())
        })
    );
    assert_eq!(r.memory, Some(MemoryRequest::PerGpu(8192)));
    assert_eq!(
        parse_ok(&["--gpus=2", "--cpus-per-gpu=4"]).cpus_per_gpu,
        Some(4)
    );
    // sbatch's exclusions
    let conflict = |words: &[&str]| {
        assert!(
            matches!(parse(words), Err(RequestError::Conflict { .. })),
            "{words:?}: {:?}",
            parse(words)
        )
    };
    conflict(&["--gpus=1", "--mem=1G", "--mem-per-gpu=1G"]);
    conflict(&["--gpus=1", "--mem-per-cpu=1G", "--mem-per-gpu=1G"]);
    conflict(&["--gpus=1", "--gpus-per-task=1"]);
    let invalid = |words: &[&str], says: &str| match parse(words) {
        Err(RequestError::Invalid(why)) => assert!(why.contains(says), "{words:?}: {why}"),
        other => panic!("{words:?}: {other:?}"),
    };
    invalid(&["--mem-per-gpu=1G"], "needs GPUs");
    invalid(&["--cpus-per-gpu=2"], "needs GPUs");
    invalid(
        &["--gpus=1", "-c", "2", "--cpus-per-gpu=2"],
        "mutually exclusive",
    );
    invalid(&["--gpus=1", "--cpus-per-gpu=0"], "at least 1");
    invalid(
        &["-N", "2", "-n", "4", "--gpus=2", "--cpus-per-gpu=2"],
        "--gpus-per-node or --gpus-per-task",
    );
    assert!(parse(&[
        "-N",
        "2",
        "-n",
        "4",
        "--gpus-per-node=1",
        "--cpus-per-gpu=2"
    ])
    .is_ok());
    // SBATCH_CPUS_PER_GPU gives way to a -c of the script or the command line, as in sbatch;
    // a script's --mem-per-gpu to SBATCH_MEM_PER_NODE.
    let script = "#!/bin/sh\n#SBATCH -c 2 --gpus=1 --mem-per-gpu=1G\ntrue\n";
    let env = vec![
        (
            "SBATCH_CPUS_PER_GPU".to_string(),
            "--cpus-per-gpu=4".to_string(),
        ),
        ("SBATCH_MEM_PER_NODE".to_string(), "--mem=8G".to_string()),
    ];
    let command = parse_sbatch_command_with_env(&args(&[]), &env, Some(script)).unwrap();
    assert_eq!(command.request.cpus_per_gpu, None);
    assert_eq!(command.request.cpus_per_task, 2);
    assert_eq!(command.request.memory, Some(MemoryRequest::PerGpu(1024)));
    // The command line's memory or GPU option replaces the script's group.
    let script = "#!/bin/sh\n#SBATCH --gpus-per-task=1 --mem-per-gpu=2G\ntrue\n";
    let r = parse_sbatch(&args(&["--gpus=2", "--mem=4G"]), Some(script)).unwrap();
    assert_eq!(r.gpus.map(|g| (g.count, g.per)), Some((2, GpuPer::PerJob)));
    assert_eq!(r.memory, Some(MemoryRequest::PerNode(4096)));
    // The JSON names.
    let json = serde_json::to_value(parse_ok(&[
        "-n",
        "1",
        "--gpus-per-task=1",
        "--mem-per-gpu=1G",
    ]))
    .unwrap();
    assert_eq!(json["gpus"]["per"], "task");
    assert_eq!(json["memory"], serde_json::json!({"per_gpu_mb": 1024}));
}

#[test]
fn alloc_feeds_the_same_estimate_as_charges() {
    let pricing: ClusterPricing = serde_yaml::from_str(
        "currency: su\npartitions:\n  gpu: { weights: \"CPU=1.0,Mem=0.25G,GRES/gpu=4.0,GRES/gpu:a100=6.0\" }\nqos_factors: { premium: \"2.0\" }\n",
    )
    .unwrap();
    let r = parse_ok(&[
        "-p",
        "gpu",
        "-q",
        "premium",
        "-N",
        "2",
        "-n",
        "8",
        "-c",
        "2",
        "--mem-per-cpu=2G",
        "--gres=gpu:a100:2",
        "-t",
        "2:00:00",
    ]);
    // 16 CPU × 1 + 32 GiB × 0.25 + 4 a100 × 6 = 48/h; × 2 h × premium 2 = 192 su
    let seconds = r.time_limit().seconds().unwrap();
    let estimate = pricing
        .estimate(
            r.partition.as_deref(),
            r.qos.as_deref(),
            &r.alloc(),
            seconds,
            0,
            &PriceBook::new(),
        )
        .unwrap();
    assert_eq!(estimate.micros, 192_000_000);
}

/// `-L/--licenses`: read as slurmctld reads the list, the command line over the script, priced
/// as `license/<name>` TRES by the weights that charge the job, written back and sent as JSON.
#[test]
fn licenses_are_read_priced_and_written_back() {
    let licenses = |r: &JobRequest| r.licenses.as_ref().map(ToString::to_string);
    let r = parse_ok(&["-L", "matlab:2,ansys", "-t", "60", "-c", "4"]);
    assert_eq!(licenses(&r).as_deref(), Some("matlab:2,ansys:1"));
    assert_eq!(r.alloc().get("license/matlab"), Some(2));
    assert_eq!(r.alloc().get("license/ansys"), Some(1));
    assert_eq!(r.alloc().cpu(), 4, "licenses change no other TRES");
    assert_eq!(
        licenses(&parse_ok(&["--licenses=MATLAB=3;ansys;MATLAB"])).as_deref(),
        Some("MATLAB:4,ansys:1")
    );
    // The command line wins over the script, as each option does; within one place the last.
    let script = "#!/bin/sh
#SBATCH -L matlab:4
#SBATCH --licenses=fluent@flexlm:2
srun ./solve
";
    let from_script = parse_sbatch(&[], Some(script)).unwrap();
    assert_eq!(licenses(&from_script).as_deref(), Some("fluent@flexlm:2"));
    let merged = parse_sbatch(&args(&["-L", "ansys:1"]), Some(script)).unwrap();
    assert_eq!(licenses(&merged).as_deref(), Some("ansys:1"));
    assert!(merged
        .to_sbatch_lines()
        .contains(&"#SBATCH --licenses=ansys:1".to_string()));
    // Errors name the option as typed.
    for (words, has) in [
        (
            &["-L", "matlab:0"][..],
            "invalid -L value \"matlab:0\": matlab: a count of 0",
        ),
        (
            &["--licenses=a|b"],
            "invalid --licenses value \"a|b\": alternatives",
        ),
        (&["--licenses", ""], "no license named"),
    ] {
        let error = parse(words).unwrap_err().to_string();
        assert!(error.contains(has), "{words:?}: {error}");
    }
    // Priced by the weights that price the charge: Slurm's `License/<name>` weight.
    let pricing: ClusterPricing = serde_yaml::from_str(
        "currency: su\npartitions:\n  batch: { weights: \"CPU=1.0,Mem=0.25G,License/matlab=2.5\" }\n",
    )
    .unwrap();
    let priced = parse_ok(&[
        "-p", "batch", "-c", "4", "--mem=4G", "-L", "matlab:2", "-t", "2:00:00",
    ]);
    // 4 CPU × 1 + 4 GiB × 0.25 + 2 matlab × 2.5 = 10/h; × 2 h = 20 su
    let estimate = |r: &JobRequest| {
        pricing
            .estimate(
                r.partition.as_deref(),
                None,
                &r.alloc(),
                r.time_limit().seconds().unwrap(),
                0,
                &PriceBook::new(),
            )
            .unwrap()
            .micros
    };
    assert_eq!(estimate(&priced), 20_000_000);
    let record_alloc = Tres::parse("cpu=4,mem=4G,node=1,license/matlab=2").unwrap();
    assert_eq!(priced.alloc(), record_alloc, "the vector slurmdbd records");
    // JSON: the sbatch text, checked with the same messages; left out when absent.
    let json = serde_json::to_value(&priced).unwrap();
    assert_eq!(json["licenses"], serde_json::json!("matlab:2"));
    assert_eq!(serde_json::from_value::<JobRequest>(json).unwrap(), priced);
    assert!(serde_json::to_value(parse_ok(&[]))
        .unwrap()
        .get("licenses")
        .is_none());
    let error = serde_json::from_str::<JobRequest>(r#"{"licenses": "a,,b"}"#).unwrap_err();
    assert!(error.to_string().contains("empty entry"), "{error}");
    // A dstack task has none.
    let task: JobRequest = serde_json::from_value(serde_json::json!({"licenses": "matlab",
        "dstack": {"type": "task", "name": "train", "commands": ["python train.py"]}}))
    .unwrap();
    let error = task.validate().unwrap_err().to_string();
    assert!(error.contains("dstack has no licenses"), "{error}");
}

/// `--mincpus`: at least that many CPUs on each node, which slurmctld allocates (and charges):
/// `ncpus = MAX(ncpus, nhosts × pn_min_cpus)`; memory per CPU follows the CPUs.
#[test]
fn mincpus_is_priced_per_node_as_slurmctld_allocates() {
    let r = parse_ok(&["--mincpus=4", "-t", "10"]);
    assert_eq!(r.min_cpus_per_node, Some(4));
    assert_eq!(r.cpus(), 4, "one task, four CPUs on its node");
    assert_eq!(r.alloc_with_default_mem(Some(1000)).get("mem"), Some(4000));
    // over the tasks' CPUs only where it is more
    assert_eq!(
        parse_ok(&["-N", "2", "-n", "2", "--mincpus", "3"]).cpus(),
        6
    );
    assert_eq!(
        parse_ok(&["-n", "8", "-c", "2", "--mincpus", "3"]).cpus(),
        16
    );
    // in whole tasks of -c CPUs (slurmctld lays out that many tasks), and nothing more with
    // --ntasks-per-node, whose count of tasks it lays out then
    for (words, cpus) in [
        (&["-n", "1", "-c", "2", "--mincpus=3"][..], 2),
        (&["-n", "1", "-c", "3", "--mincpus=7"], 6),
        (&["-n", "1", "-c", "2", "--mincpus=4"], 4),
        (
            &["-N", "1", "--ntasks-per-node=1", "-c", "2", "--mincpus=4"],
            2,
        ),
        (&["-N", "2", "-n", "2", "-c", "2", "--mincpus=5"], 10),
    ] {
        assert_eq!(parse_ok(words).cpus(), cpus, "{words:?}");
    }
    // --ntasks-per-node × nodes tasks when that is more than -n, as slurmctld lays them out
    assert_eq!(
        parse_ok(&["-N", "2", "-n", "2", "--ntasks-per-node=2"]).cpus(),
        4
    );
    let per_node = parse_ok(&["-N", "2", "-n", "3", "--ntasks-per-node=2", "-c", "2"]);
    assert_eq!(per_node.cpus(), 8);
    // where slurmctld only picks nodes by it (24.11.1 on), the tasks' CPUs
    let picks = PartitionDefaults {
        min_cpus_only_select: true,
        ..PartitionDefaults::default()
    };
    assert_eq!(r.cpus_with(&picks), 1);
    let two = parse_ok(&["-N", "2", "-n", "2", "--mincpus", "3"]);
    assert_eq!(two.cpus_with(&picks), 2);
    // the script's, under the command line's; written back as a #SBATCH line and as JSON
    let script = "#!/bin/sh\n#SBATCH --mincpus=2\nsrun ./app\n";
    assert_eq!(
        parse_sbatch(&[], Some(script)).unwrap().min_cpus_per_node,
        Some(2)
    );
    let merged = parse_sbatch(&args(&["--mincpus=5"]), Some(script)).unwrap();
    assert_eq!(merged.min_cpus_per_node, Some(5));
    assert!(merged
        .to_sbatch_lines()
        .contains(&"#SBATCH --mincpus=5".to_string()));
    let json = serde_json::to_value(&merged).unwrap();
    assert_eq!(json["min_cpus_per_node"], serde_json::json!(5));
    assert_eq!(serde_json::from_value::<JobRequest>(json).unwrap(), merged);
    for (words, has) in [
        (&["--mincpus=0"][..], "--mincpus must be at least 1"),
        (&["--mincpus", "-1"], "not a whole number"),
        (&["--mincpus"], "--mincpus needs a value"),
        (&["--mincpus=65534"], "--mincpus must be at most 65533"),
    ] {
        let error = parse(words).unwrap_err().to_string();
        assert!(error.contains(has), "{words:?}: {error}");
    }
    let zero: JobRequest = serde_json::from_str(r#"{"min_cpus_per_node": 0}"#).unwrap();
    assert!(zero
        .validate()
        .unwrap_err()
        .to_string()
        .contains("--mincpus must be at least 1"));
}

/// `--hint`, `--threads-per-core`, `--ntasks-per-core`: read as sbatch reads them, priced for
/// the whole cores slurmctld allocates where the partition declares its threads per core (the
/// figures 22.05.8 and 24.11.5 allocated on a node of 4 cores × 2 threads, DefMemPerCPU=1000).
#[test]
fn core_threads_are_priced_as_slurmctld_allocates_whole_cores() {
    let smt = PartitionDefaults {
        mem_per_cpu_mb: Some(1000),
        threads_per_core: Some(2),
        ..PartitionDefaults::default()
    };
    for (words, cpus, mem) in [
        (&["-n", "1"][..], 2, 2000),
        (&["-n", "3"], 4, 4000),
        (&["-n", "2", "-c", "3"], 6, 6000),
        (&["-n", "3", "--hint=nomultithread"], 6, 3000),
        (&["-n", "3", "--hint=compute_bound"], 6, 3000),
        (&["-n", "3", "--hint", "memory_bound"], 6, 3000),
        (&["-n", "1", "-c", "3", "--threads-per-core=1"], 6, 3000),
        (&["-n", "3", "--hint=multithread"], 4, 4000),
        (&["-n", "3", "--ntasks-per-core=1"], 6, 6000),
        (&["-n", "2", "-c", "3", "--ntasks-per-core=1"], 8, 8000),
        (&["-n", "2", "-c", "3", "--ntasks-per-core=2"], 6, 6000),
        (&["-n", "1", "--mem=1000"], 2, 1000),
        (&["-N", "1", "--hint=nomultithread"], 2, 1000),
        // sbatch: -N without -n runs a task per thread asked for on each node
        (&["-N", "1", "--threads-per-core=2"], 2, 2000),
    ] {
        let r = parse_ok(words);
        let alloc = r.alloc_with_defaults(&smt);
        assert_eq!(
            (alloc.get("cpu"), alloc.get("mem")),
            (Some(cpus), Some(mem)),
            "{words:?}"
        );
        // where a core has one thread, as asked
        let one = PartitionDefaults {
            threads_per_core: Some(1),
            ..PartitionDefaults::default()
        };
        assert_eq!(r.cpus_with(&one), r.cpus(), "{words:?}");
    }
    // --mincpus with a core per task (22.05 to 24.11.0 lay out the CPUs it brings as tasks):
    // -n 1 -c 3 --mincpus=7 is 2 tasks of 2 cores each
    let raised = parse_ok(&["-n", "1", "-c", "3", "--mincpus=7", "--ntasks-per-core=1"]);
    assert_eq!(raised.cpus_with(&smt), 8);
    // whole nodes: every CPU, memory for the threads the job uses of each core
    let node = NodeSize {
        cpus: 8,
        mem_mb: 16_000,
        gpus: 0,
    };
    let whole = PartitionDefaults {
        node: Some(node),
        ..smt
    };
    let hinted_whole = parse_ok(&["--exclusive", "--hint=nomultithread", "--mem-per-cpu=1000"]);
    let alloc = hinted_whole.alloc_with_defaults(&whole);
    assert_eq!((alloc.get("cpu"), alloc.get("mem")), (Some(8), Some(4000)));
    // ... and a node holds as many one-thread tasks as it has cores
    let eight = parse_ok(&["--exclusive", "-n", "8", "--hint=nomultithread"]);
    assert_eq!(eight.whole_nodes_needed(&node, &whole), Some(2));
    assert_eq!(
        parse_ok(&["--exclusive", "-n", "8"]).whole_nodes_needed(&node, &whole),
        Some(1)
    );
    // tasks that do not fill whole cores run on the nodes they were priced for
    for (words, pinned) in [
        (&["-n", "2", "-c", "3"][..], true),
        (&["-n", "2", "-c", "2"], false),
        (&["-n", "1", "-c", "3"], false),
        (&["-n", "2", "-c", "3", "--hint=nomultithread"], false),
        (&["-n", "2", "-c", "3", "--ntasks-per-core=1"], true),
    ] {
        let r = parse_ok(words);
        assert_eq!(r.needs_pinned_nodes(&smt), pinned, "{words:?}");
        assert!(
            !r.needs_pinned_nodes(&PartitionDefaults::default()),
            "{words:?}"
        );
    }
    assert_eq!(parse_ok(&["-N", "2", "--threads-per-core=2"]).ntasks, 4);
    assert_eq!(parse_ok(&["-N", "2", "--hint=nomultithread"]).ntasks, 2);
    assert_eq!(parse_ok(&["-N", "1-2", "--threads-per-core=2"]).ntasks, 1);
    assert_eq!(parse_ok(&["-n", "3", "--threads-per-core=2"]).ntasks, 3);
    // what is forwarded: the hint's settings, as sbatch sends them
    let hinted = parse_ok(&["--hint=nomultithread"]);
    assert_eq!(
        (hinted.job_threads_per_core(), hinted.job_ntasks_per_core()),
        (Some(1), None)
    );
    let multi = parse_ok(&["--hint=multithread"]);
    assert_eq!(
        (multi.job_threads_per_core(), multi.job_ntasks_per_core()),
        (None, Some(65_535))
    );
    // the script's under the command line's, written back, and as JSON
    let script =
        "#!/bin/sh\n#SBATCH --hint=nomultithread\n#SBATCH --ntasks-per-core=1\nsrun ./app\n";
    let error = parse_sbatch(&[], Some(script)).unwrap_err().to_string();
    assert!(error.contains("--hint cannot be combined"), "{error}");
    let script =
        "#!/bin/sh\n#SBATCH --threads-per-core=1\n#SBATCH --ntasks-per-core=1\nsrun ./app\n";
    let merged = parse_sbatch(&args(&["--threads-per-core=2"]), Some(script)).unwrap();
    assert_eq!(
        (merged.threads_per_core, merged.ntasks_per_core),
        (Some(2), Some(1))
    );
    let lines = merged.to_sbatch_lines();
    assert!(
        lines.contains(&"#SBATCH --threads-per-core=2".to_string()),
        "{lines:?}"
    );
    assert!(
        lines.contains(&"#SBATCH --ntasks-per-core=1".to_string()),
        "{lines:?}"
    );
    let json = serde_json::to_value(&hinted).unwrap();
    assert_eq!(json["hint"], serde_json::json!("nomultithread"));
    assert_eq!(serde_json::from_value::<JobRequest>(json).unwrap(), hinted);
    let from_lines = parse_sbatch(
        &[],
        Some(&format!(
            "#!/bin/sh\n{}\n",
            hinted.to_sbatch_lines().join("\n")
        )),
    );
    assert_eq!(from_lines.unwrap().hint, hinted.hint);
    // JSON without ntasks: a task per thread on each of `nodes`, as sbatch's -N
    let json: JobRequest = serde_json::from_str(r#"{"nodes": 2, "threads_per_core": 2}"#).unwrap();
    assert_eq!(json.ntasks, 4);
    // the variables: SBATCH_HINT's hint gives way to an option's --threads-per-core, and
    // SBATCH_THREADS_PER_CORE to an option's --hint
    let env = |name: &str, word: &str| vec![(name.to_string(), word.to_string())];
    let with_env = |cli: &[&str], env: Vec<(String, String)>| {
        parse_sbatch_command_with_env(&args(cli), &env, Some(SCRIPT)).map(|c| c.request)
    };
    let r = with_env(
        &["--threads-per-core=1"],
        env("SBATCH_HINT", "--hint=multithread"),
    )
    .unwrap();
    assert_eq!((r.hint, r.threads_per_core), (None, Some(1)));
    let r = with_env(
        &["--hint=nomultithread"],
        env("SBATCH_THREADS_PER_CORE", "--threads-per-core=2"),
    )
    .unwrap();
    assert_eq!(r.threads_per_core, None);
    assert_eq!(r.hint.unwrap().as_str(), "nomultithread");
    let r = with_env(&[], env("SBATCH_HINT", "--hint=compute_bound")).unwrap();
    assert_eq!(r.job_threads_per_core(), Some(1));
    // a variable's bad hint under an option is no error, as sbatch checks only the one left
    let r = with_env(&["--threads-per-core=2"], env("SLURM_HINT", "--hint=bogus")).unwrap();
    assert_eq!((r.hint, r.threads_per_core), (None, Some(2)));
    let r = with_env(&["--hint=multithread"], env("SLURM_HINT", "--hint=bogus")).unwrap();
    assert_eq!(r.hint.unwrap().as_str(), "multithread");
    // both from variables: the hint is dropped, as sbatch drops it
    let both = vec![
        (
            "SBATCH_HINT".to_string(),
            "--hint=nomultithread".to_string(),
        ),
        (
            "SBATCH_THREADS_PER_CORE".to_string(),
            "--threads-per-core=2".to_string(),
        ),
    ];
    let r = with_env(&[], both).unwrap();
    assert_eq!((r.hint, r.threads_per_core), (None, Some(2)));
    for (words, has) in [
        (&["--hint=fast"][..], "unknown hint \"fast\""),
        (
            &["--hint=help"],
            "the hints are compute_bound, memory_bound, multithread, nomultithread",
        ),
        (&["--hint=nomultithread,"], "an empty hint"),
        (
            &["--hint=nomultithread", "--threads-per-core=1"],
            "--hint cannot be combined",
        ),
        (
            &["--hint=multithread", "--ntasks-per-core=2"],
            "--hint cannot be combined",
        ),
        (
            &["--threads-per-core=0"],
            "--threads-per-core must be at least 1",
        ),
        (
            &["--ntasks-per-core=0"],
            "--ntasks-per-core must be at least 1",
        ),
        (
            &["--ntasks-per-core=65534"],
            "--ntasks-per-core must be at most 65533",
        ),
        (
            &["--threads-per-core=1", "--ntasks-per-core=2"],
            "is more than --threads-per-core",
        ),
        (&["--threads-per-core", "x"], "not a whole number"),
    ] {
        let error = parse(words).unwrap_err().to_string();
        assert!(error.contains(has), "{words:?}: {error}");
    }
    let error = serde_json::from_str::<JobRequest>(r#"{"hint": "smt"}"#).unwrap_err();
    assert!(error.to_string().contains("unknown hint"), "{error}");
    let task: JobRequest = serde_json::from_value(serde_json::json!({"hint": "nomultithread",
        "dstack": {"type": "task", "name": "train", "commands": ["python train.py"]}}))
    .unwrap();
    let error = task.validate().unwrap_err().to_string();
    assert!(error.contains("do not apply to a dstack task"), "{error}");
}

/// `r`'s Slurm options: named by `given`, written back as `#SBATCH` lines that read the same,
/// and in JSON `json`, which reads back as `r`.
/// Each of `values` given to `option` is refused as an invalid value.
fn refuses_values(option: &str, values: &[&str]) {
    for value in values {
        assert!(
            matches!(
                parse(&[&format!("{option}={value}")]),
                Err(RequestError::InvalidValue { .. })
            ),
            "{option}={value:?}"
        );
    }
}

fn slurm_options_round_trip(r: &JobRequest, given: &[&str], json: serde_json::Value) {
    assert_eq!(r.slurm.given(), given);
    let lines = r.to_sbatch_lines();
    let back = parse_sbatch(&[], Some(&format!("#!/bin/sh\n{}\n", lines.join("\n")))).unwrap();
    assert_eq!(back.slurm, r.slurm, "{lines:?}");
    let value = serde_json::to_value(r).unwrap();
    assert_eq!(value["slurm"], json);
    assert_eq!(&serde_json::from_value::<JobRequest>(value).unwrap(), r);
}

/// `-s/--oversubscribe`, `--gres-flags`, `--acctg-freq`, `--get-user-env`: read as sbatch
/// reads them, not priced; `--exclusive` with `--oversubscribe` refused in one place, the
/// command line's winning over the script's.
#[test]
fn sharing_binding_sampling_and_the_login_environment() {
    let r = parse_ok(&[
        "-s",
        "--gres-flags=Enforce-Binding",
        "--acctg-freq=task=30,Energy=60",
    ]);
    assert!(r.slurm.oversubscribe);
    assert_eq!(r.slurm.gres_flags, Some(GresFlags::EnforceBinding));
    assert_eq!(r.slurm.acctg_freq.as_deref(), Some("task=30,Energy=60"));
    assert_eq!(r.alloc(), parse_ok(&[]).alloc(), "not priced");
    slurm_options_round_trip(
        &r,
        &["--oversubscribe", "--gres-flags", "--acctg-freq"],
        serde_json::json!({"oversubscribe": true, "gres_flags": "enforce-binding",
            "acctg_freq": "task=30,Energy=60"}),
    );
    assert_eq!(
        parse_ok(&["--acctg-freq", "30"])
            .slurm
            .acctg_freq
            .as_deref(),
        Some("30")
    );
    // the command line's --exclusive over the script's -s, and the other way round
    let script = "#!/bin/sh\n#SBATCH -s\nsrun ./app\n";
    let cli = parse_sbatch(&args(&["--exclusive"]), Some(script)).unwrap();
    assert!(cli.exclusive && !cli.slurm.oversubscribe);
    let script = "#!/bin/sh\n#SBATCH --exclusive\nsrun ./app\n";
    let cli = parse_sbatch(&args(&["--oversubscribe"]), Some(script)).unwrap();
    assert!(!cli.exclusive && cli.slurm.oversubscribe);
    // in one place the later one wins, as sbatch sets one field with both
    let last = parse_ok(&["--exclusive", "-s"]);
    assert!(!last.exclusive && last.slurm.oversubscribe);
    let last = parse_ok(&["-s", "--exclusive"]);
    assert!(last.exclusive && !last.slurm.oversubscribe);
    // in JSON, both is a contradiction
    let both: JobRequest =
        serde_json::from_str(r#"{"exclusive": true, "slurm": {"oversubscribe": true}}"#).unwrap();
    let error = both.validate().unwrap_err().to_string();
    assert!(error.contains("--exclusive and --oversubscribe"), "{error}");
}

/// `--wait-all-nodes`, `--use-min-nodes`, `--spread-job`: read as sbatch reads them, forwarded,
/// not priced; `--spread-job` only with the nodes to spread over.
#[test]
fn when_the_script_starts_and_how_nodes_are_filled() {
    let r = parse_ok(&["--wait-all-nodes=1", "--use-min-nodes", "-N", "2-4"]);
    assert_eq!(r.slurm.wait_all_nodes, Some(true));
    assert!(r.slurm.use_min_nodes && !r.slurm.spread_job);
    assert_eq!(r.nodes, 2, "a range's minimum");
    assert_eq!(
        parse_ok(&["--wait-all-nodes", "0"]).slurm.wait_all_nodes,
        Some(false)
    );
    refuses_values("--wait-all-nodes", &["2", "+1", "", "yes"]);
    let spread = parse_ok(&["--spread-job", "-N", "2", "-n", "4"]);
    assert!(spread.slurm.spread_job);
    assert_eq!(
        spread.alloc(),
        parse_ok(&["-N", "2", "-n", "4"]).alloc(),
        "not priced"
    );
    assert!(parse_ok(&["--spread-job", "-w", "n[1-2]"]).slurm.spread_job);
    let error = parse(&["--spread-job", "-n", "4"]).unwrap_err().to_string();
    assert!(
        error.contains("--spread-job without a node count") && error.contains("-N"),
        "{error}"
    );
    // in JSON alike: nodes or nodelist
    for (json, ok) in [
        (r#"{"ntasks": 4, "slurm": {"spread_job": true}}"#, false),
        (
            r#"{"nodes": 2, "ntasks": 4, "slurm": {"spread_job": true}}"#,
            true,
        ),
        (
            r#"{"slurm": {"spread_job": true, "nodelist": "n[1-2]"}, "nodes": 2}"#,
            true,
        ),
    ] {
        let r: JobRequest = serde_json::from_str(json).unwrap();
        assert_eq!(r.validate().is_ok(), ok, "{json}");
    }
    let all = parse_ok(&[
        "--wait-all-nodes=0",
        "--use-min-nodes",
        "--spread-job",
        "-N",
        "2",
    ]);
    slurm_options_round_trip(
        &all,
        &["--wait-all-nodes", "--use-min-nodes", "--spread-job"],
        serde_json::json!({"wait_all_nodes": false, "use_min_nodes": true, "spread_job": true}),
    );
}

/// `script` read as sbatch reads it, and a plain script with sbatch's `options`: the same job.
fn same_job(script: &str, options: &[&str]) {
    let mut ours = parse_sbatch(&[], Some(script)).unwrap_or_else(|e| panic!("{script:?}: {e}"));
    let mut theirs = parse_sbatch(&args(options), Some("#!/bin/sh\nhostname\n"))
        .unwrap_or_else(|e| panic!("{options:?}: {e}"));
    ours.script = None;
    theirs.script = None;
    assert_eq!(ours, theirs, "{script:?}");
}

/// The line and message of a script refused for one of its lines; `None` when it is accepted.
fn refused_at(script: &str) -> Option<(usize, String)> {
    match parse_sbatch(&[], Some(script)) {
        Err(RequestError::ScriptLine { line, error }) => Some((line, error.to_string())),
        Ok(_) => None,
        Err(other) => panic!("{script:?}: {other:?}"),
    }
}

/// `script` parsed with the command line `options`.
fn parse_ok_script(options: &[&str], script: &str) -> JobRequest {
    parse_sbatch(&args(options), Some(script)).unwrap_or_else(|e| panic!("{script:?}: {e}"))
}

/// `#PBS` lines become the options sbatch translates them into (Slurm's `xlate.c`): Torque's
/// and PBS Pro's resource lists, names, queues, mail, arrays, holds, exported variables.
#[test]
fn pbs_lines_are_read_as_sbatch_translates_them() {
    same_job(
        "#!/bin/bash\n#PBS -N pbsjob\n#PBS -q batch\n\
         #PBS -l nodes=2:ppn=4,walltime=01:30:00,mem=4gb\n#PBS -j oe\n#PBS -V\n\
         #PBS -S /bin/bash\n#PBS -m abe\n#PBS -M alice@example.org\n#PBS -r n -k oe\n\
         cd \"$PBS_O_WORKDIR\"\n",
        &[
            "-J",
            "pbsjob",
            "-p",
            "batch",
            "-N",
            "2",
            "-n",
            "8",
            "-t",
            "01:30:00",
            "--mem=4g",
            "--mail-type=BEGIN,END,FAIL",
            "--mail-user=alice@example.org",
        ],
    );
    // PBS Pro's chunk: CPUs per task from ncpus / mpiprocs, as sbatch divides them
    same_job(
        "#!/bin/sh\n#PBS -l select=2:ncpus=8:mpiprocs=4:mem=16gb\n#PBS -l walltime=2:00:00\n\
         #PBS -A physics\n#PBS -J 1-4\nhostname\n",
        &[
            "-N",
            "2",
            "--mincpus=8",
            "--ntasks-per-node=4",
            "-c",
            "2",
            "--mem=16g",
            "-t",
            "2:00:00",
            "-A",
            "physics",
            "--array=1-4",
        ],
    );
    // GPUs per node, a hold, nice, Torque's -t array, -v added to the script's --export,
    // output and error, 23.02's -d; options grouped and values attached, as getopt reads them
    same_job(
        "#!/bin/sh\n#SBATCH --export=A=1\n#PBS -v B=2,C\n#PBS -l nodes=1:ppn=2:gpus=1\n\
         #PBS -hV -p10\n#PBS -t 0-3%2\n#PBS -o out.txt -e err.txt\n#PBS -d /scratch/run\n\
         hostname\n",
        &[
            "--export=A=1,B=2,C",
            "-N",
            "1",
            "-n",
            "2",
            "--gpus-per-node=1",
            "-H",
            "--nice=10",
            "--array=0-3%2",
            "-o",
            "out.txt",
            "-e",
            "err.txt",
            "-D",
            "/scratch/run",
        ],
    );
    // accelerators, CPU time as the limit, temporary disk, nice in the list, -m n
    same_job(
        "#!/bin/sh\n#PBS -l nodes=1:ppn=4,naccelerators=2\n#PBS -l cput=10:00,file=10gb\n\
         #PBS -l nice=5\n#PBS -m n\nhostname\n",
        &[
            "-N",
            "1",
            "-n",
            "4",
            "--gres=gpu:2",
            "-t",
            "10:00",
            "--tmp=10g",
            "--nice=5",
            "--mail-type=NONE",
        ],
    );
    same_job(
        "#!/bin/sh\n#PBS -l accelerator=true:ncpus=2\nhostname\n",
        &["--mincpus=2", "--gres=gpu:1"],
    );
    // a value on the next line, as getopt takes it
    same_job(
        "#!/bin/sh\n#PBS -N\n#PBS named\nhostname\n",
        &["-J", "named"],
    );
    // blanks in a quoted list, an empty nice= (--nice: 100), a hetjob word ending its line
    // (seen on 22.05.8: JobName=a Partition=batch TimeLimit=01:00:00 Nice=100)
    same_job(
        "#!/bin/sh\n#PBS -l \"walltime=1:00:00, nice=\"\n#PBS -N a hetjob -q x\nhostname\n",
        &["-t", "1:00:00", "--nice", "-J", "a"],
    );

    // -a in sbatch's own forms
    same_job(
        "#!/bin/sh\n#PBS -a 2030-01-01T10:00\nhostname\n",
        &["--begin=2030-01-01T10:00"],
    );

    // #PBS over #SBATCH, the environment over both, the command line over all
    let script = "#!/bin/sh\n#SBATCH -t 10\n#PBS -l walltime=00:20:00\nhostname\n";
    assert_eq!(parse_ok_script(&[], script).time_limit_min, Some(20));
    assert_eq!(
        parse_ok_script(&["-t", "5"], script).time_limit_min,
        Some(5)
    );
    let env = [("SBATCH_TIMELIMIT".to_string(), "--time=7".to_string())];
    let r = parse_sbatch_command_with_env(&[], &env, Some(script)).unwrap();
    assert_eq!(r.request.time_limit_min, Some(7));
    // -W depend= is a dependency (one cluster named, as for -d); other attributes are noted
    let r = parse_sbatch_command(
        &args(&["-M", "onprem"]),
        Some("#!/bin/sh\n#PBS -W depend=afterok:12\n#PBS -W group_list=hpc\n#PBS -l pmem=2gb\nhostname\n"),
    )
    .unwrap();
    assert_eq!(r.request.slurm.dependency.as_deref(), Some("afterok:12"));
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("line 3") && n.contains("group_list=hpc"))
            && r.notes
                .iter()
                .any(|n| n.contains("line 4") && n.contains("pmem=2gb")),
        "{:?}",
        r.notes
    );
    // -W umask=: the job's umask, octal with its leading 0, as sbatch writes SLURM_UMASK
    for (mask, written) in [("027", "0027"), ("0", "0000"), ("0777", "0777")] {
        let script = format!("#!/bin/sh\n#PBS -W umask={mask}\nhostname\n");
        let command = parse_sbatch_command(&[], Some(&script)).unwrap();
        assert_eq!(command.umask.as_deref(), Some(written), "{mask}");
    }
    assert_eq!(parse_sbatch_command(&[], Some(SCRIPT)).unwrap().umask, None);
    // sent as written: the cluster's slurmctld reads no #PBS line
    let script = "#!/bin/sh\n#PBS -q batch\nhostname\n";
    assert_eq!(parse_ok_script(&[], script).script.as_deref(), Some(script));
}

/// `#BSUB` lines as sbatch translates them; a script with any has its `#PBS` lines left alone.
#[test]
fn bsub_lines_are_read_as_sbatch_translates_them() {
    same_job(
        "#!/bin/sh\n#BSUB -J lsfjob\n#BSUB -q normal\n#BSUB -n 2,8\n#BSUB -W 90\n\
         #BSUB -M 2G\n#BSUB -cwd /scratch\n#BSUB -o out.%J -e err.%J\n#BSUB -x\nhostname\n",
        &[
            "-J",
            "lsfjob",
            "-p",
            "normal",
            "-n",
            "8",
            "-t",
            "90",
            "--mem-per-cpu=2G",
            "-D",
            "/scratch",
            "-o",
            "out.%J",
            "-e",
            "err.%J",
            "--exclusive",
        ],
    );
    same_job(
        "#!/bin/sh\n#BSUB -m \"op-n1 op-n2\"\n#PBS -q long\nhostname\n",
        &["-w", "op-n1,op-n2"],
    );
}

/// Where sbatch would run a job other than the lines ask for, or refuses the script itself,
/// the script is refused naming the line and why.
#[test]
fn pbs_and_bsub_lines_sbatch_would_misread_are_refused() {
    for (line, needle) in [
        ("#PBS -l procs=16", "procs=16"),
        ("#PBS -l select=1:ncpus=4:ngpus=1", "ngpus=1"),
        ("#PBS -l Walltime=1:00:00", "Walltime=1:00:00"),
        ("#PBS -l mppmem=4gb", "mppmem=4gb"),
        ("#PBS -l walltime=3600", "3600 minutes"),
        ("#PBS -l nodes=1:ppn=8:ib", "node name"),
        ("#PBS -l nodes=1:ppn=4+1:ppn=2", "`+` parts"),
        ("#PBS -l proc=fast", "proc="),
        ("#PBS -l select=2,walltime=1:00:00", "up to the next `:`"),
        ("#PBS -l accelerator=yes", "accelerator=true"),
        ("#PBS -P project", "#PBS -P: sbatch does not know"),
        ("#PBS -N", "needs a value"),
        ("#PBS stray", "not an option"),
        ("#PBSx", "#PBS x: not an option"),
        ("#PBS --job_name=x", "one-letter options"),
        ("#PBS -m p", "b, e, a and n"),
        ("#PBS -l mem=lots", "(sbatch's --mem=lots)"),
        (
            "#PBS -W umask=22",
            "decimal number (octal 26): write the mask in octal with its leading 0 (umask=022)",
        ),
        ("#PBS -a 1201", "not a time of day"),
        ("#PBS -a 202612011800.30", "HH:MM"),
        ("#PBS -W umask=01000", "up to 0777"),
        ("#PBS -W umask=0x12", "in octal"),
        (
            "#PBS -l nodes=2:ppn=4 hostname",
            "#PBS hostname: not an option",
        ),
        ("#BSUB -W 1:30", "minutes:seconds"),
        ("#BSUB -M 4000", "kilobytes"),
        ("#BSUB -c 10", "CPU time"),
        ("#BSUB -x\n#BSUB -cwd /tmp", "-cwd"),
        ("#BSUB -Jname\n#BSUB -cwd /tmp", "put #BSUB -cwd first"),
        (
            "#PBS -l select=1:ncpus=8:vmem=8gb:mpiprocs=4",
            "and mpiprocs=4 with it",
        ),
        ("#PBS -l naccelerators=0", "from 1"),
        (
            "#BSUB -R \"span[hosts=1]\"",
            "#BSUB -R: sbatch does not know",
        ),
        ("#BSUB -n 2,", "maximum"),
    ] {
        let script = format!("#!/bin/sh\n{line}\nhostname\n");
        let (at, why) = refused_at(&script).unwrap_or_else(|| panic!("{line:?} accepted"));
        assert!(
            at == 2 || (at == 3 && line.contains('\n')),
            "{line:?}: line {at}"
        );
        assert!(why.contains(needle), "{line:?}: {why}");
        println!("{line:?}: {why}");
    }
    // no octal suggestion for a number that has an 8 or a 9
    let (_, why) = refused_at("#!/bin/sh\n#PBS -W umask=28\nhostname\n").unwrap();
    assert!(
        why.ends_with("(octal 34): write the mask in octal with its leading 0"),
        "{why}"
    );
    // naccelerators beside the script's --gres (sbatch would add them up)
    let (at, why) =
        refused_at("#!/bin/sh\n#SBATCH --gres=gpu:1\n#PBS -l naccelerators=1\nhostname\n").unwrap();
    assert_eq!(at, 3);
    assert!(why.contains("--gres"), "{why}");
}

/// `--ignore-pbs` (command line, script, variable) leaves the lines out, as in sbatch; sbatch
/// reads such lines before the script's 101st line not starting with `#`, at the start of the
/// line.
#[test]
fn pbs_and_bsub_lines_are_left_out_where_sbatch_leaves_them_out() {
    let pbs = "#!/bin/sh\n#SBATCH -t 10\n#PBS -l procs=4\nsrun ./app\n";
    let bsub = "#!/bin/sh\nhostname\n#BSUB -R span\n";
    for (script, line) in [(pbs, 3), (bsub, 3)] {
        assert_eq!(refused_at(script).map(|(at, _)| at), Some(line));
        let r = parse_sbatch(&args(&["--ignore-pbs"]), Some(script)).unwrap();
        assert_eq!(r.script.as_deref(), Some(script), "sent as written");
        let env = [("SBATCH_IGNORE_PBS".to_string(), "--ignore-pbs".to_string())];
        assert!(parse_sbatch_command_with_env(&args(&[]), &env, Some(script)).is_ok());
    }
    let ignored =
        "#!/bin/sh\n#SBATCH -t 10\n#SBATCH --ignore-pbs\n#PBS -l walltime=00:20:00\nhostname\n";
    assert_eq!(parse_ok_script(&[], ignored).time_limit_min, Some(10));
    // not at the start of the line, turned off with ##, or after 100 lines not starting with
    // `#` (blank ones count): sbatch reads none of them
    assert_eq!(
        refused_at("#!/bin/sh\n #PBS -P x\n##PBS -P x\necho '#PBS -P x'\n"),
        None
    );
    for filler in ["true\n", "\n"] {
        let late = format!("#!/bin/sh\n{}#PBS -P x\n", filler.repeat(101));
        assert_eq!(refused_at(&late), None, "{filler:?}");
        let within = format!("#!/bin/sh\n{}#PBS -P x\n", filler.repeat(100));
        assert_eq!(refused_at(&within).map(|(line, _)| line), Some(102));
        // read after the script's first command, unlike #SBATCH lines
        let within = format!("#!/bin/sh\n{}#PBS -q long\n", filler.repeat(100));
        assert_eq!(
            parse_ok_script(&[], &within).partition.as_deref(),
            Some("long")
        );
    }
    // sbatch reads the #BSUB lines when there are any, and then no #PBS line
    let both = "#!/bin/sh\n#PBS -P x\nhostname\n#BSUB -q short\n";
    assert_eq!(
        parse_ok_script(&[], both).partition.as_deref(),
        Some("short")
    );
    // --wrap: sbatch reads no lines of it
    assert!(parse_sbatch(&args(&["--wrap", "true\n#PBS -P x"]), None).is_ok());
    // #SBATCH --ignore-pbs after the first command is not read, by sbatch either
    assert!(refused_at("#!/bin/sh\n#PBS -P x\ntrue\n#SBATCH --ignore-pbs\n").is_some());
}

/// An on/off variable's off value resets its option, the script's setting too, as sbatch reads
/// the variables after the script (`!--option` from the client).
#[test]
fn an_off_variable_resets_its_option_over_the_script() {
    let script = "#!/bin/sh\n#SBATCH --no-requeue\n#SBATCH --spread-job -N 2\nsrun ./app\n";
    let with_env = |env: &[(&str, &str)]| {
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        parse_sbatch_command_with_env(&args(&[]), &env, Some(script))
    };
    let r = with_env(&[]).unwrap().request;
    assert!(r.slurm.requeue == Some(false) && r.slurm.spread_job);
    let r = with_env(&[
        ("SBATCH_REQUEUE", "!--requeue"),
        ("SBATCH_SPREAD_JOB", "!--spread-job"),
    ])
    .unwrap()
    .request;
    assert_eq!(r.slurm.requeue, None, "one setting, reset");
    assert!(!r.slurm.spread_job);
    // a later variable's reset clears an earlier one's setting, in sbatch's order
    let r = with_env(&[
        ("SBATCH_NO_REQUEUE", "--no-requeue"),
        ("SBATCH_REQUEUE", "!--requeue"),
    ])
    .unwrap()
    .request;
    assert_eq!(r.slurm.requeue, None);
    // the command line still wins
    let env = [("SBATCH_WAIT".to_string(), "!--wait".to_string())];
    let command = parse_sbatch_command_with_env(&args(&["-W"]), &env, Some(script)).unwrap();
    assert!(command.wait);
    assert!(matches!(
        with_env(&[("SBATCH_ACCOUNT", "!--account")]),
        Err(RequestError::Invalid(ref why)) if why.starts_with("SBATCH_ACCOUNT in the environment")
    ));
}

/// `--delay-boot` in Slurm's time forms (a bare number minutes; UNLIMITED refused) and
/// `--mcs-label`: forwarded, not priced.
#[test]
fn reboot_delay_and_mcs_label() {
    for (text, seconds) in [
        ("10", 600),
        ("1:30", 90),
        ("2:00:00", 7200),
        ("1-0", 86_400),
        ("0", 0),
    ] {
        assert_eq!(parse_delay_boot(text), Ok(seconds), "{text}");
    }
    refuses_values("--delay-boot", &["UNLIMITED", "soon", "", "-5"]);
    let r = parse_ok(&["--delay-boot=10", "--mcs-label", "physics"]);
    assert_eq!(r.slurm.delay_boot.as_deref(), Some("10"));
    assert_eq!(r.slurm.mcs_label.as_deref(), Some("physics"));
    assert_eq!(r.alloc(), parse_ok(&[]).alloc(), "not priced");
    slurm_options_round_trip(
        &r,
        &["--delay-boot", "--mcs-label"],
        serde_json::json!({"delay_boot": "10", "mcs_label": "physics"}),
    );
    let bad: JobRequest =
        serde_json::from_str(r#"{"slurm": {"delay_boot": "UNLIMITED"}}"#).unwrap();
    assert!(bad.validate().is_err());
    let bad: JobRequest = serde_json::from_str(r#"{"slurm": {"mcs_label": "a\nb"}}"#).unwrap();
    assert!(bad.validate().is_err());
}

/// `--contiguous`, `--extra`, `--priority` (`TOP`, numbers below `NO_VAL`; `0` asks nothing,
/// as sbatch sends none, and wins over a script's): forwarded, not priced.
#[test]
fn contiguous_extra_and_priority() {
    for (text, priority) in [
        ("TOP", TOP_PRIORITY),
        ("top", TOP_PRIORITY),
        ("1", 1),
        ("0", 0),
        ("4294967293", 4_294_967_293),
    ] {
        assert_eq!(parse_priority(text), Ok(priority), "{text}");
    }
    refuses_values(
        "--priority",
        &["4294967294", "-1", "10x", "", "high", "99999999999"],
    );
    refuses_values("--extra", &[""]);
    let r = parse_ok(&["--contiguous", "--extra=rack=a&gpu", "--priority=TOP"]);
    assert!(r.slurm.contiguous);
    assert_eq!(r.slurm.extra.as_deref(), Some("rack=a&gpu"));
    assert_eq!(r.slurm.priority, Some(TOP_PRIORITY));
    assert_eq!(r.alloc(), parse_ok(&[]).alloc(), "not priced");
    slurm_options_round_trip(
        &r,
        &["--contiguous", "--extra", "--priority"],
        serde_json::json!({"contiguous": true, "extra": "rack=a&gpu", "priority": 4_294_967_293u32}),
    );
    let r = parse_ok(&["--priority", "500"]);
    slurm_options_round_trip(&r, &["--priority"], serde_json::json!({"priority": 500}));
    // 0 asks nothing (sbatch sends no priority), and on the command line wins over a script's
    assert_eq!(parse_ok(&["--priority=0"]).slurm.priority, None);
    let script = "#!/bin/sh\n#SBATCH --priority=7\n#SBATCH --extra=a\nhostname\n";
    let r = parse_sbatch(&args(&["--priority=0", "--extra=b"]), Some(script)).unwrap();
    assert_eq!(
        (r.slurm.priority, r.slurm.extra.as_deref()),
        (None, Some("b"))
    );
    let r = parse_sbatch(&[], Some(script)).unwrap();
    assert_eq!(r.slurm.priority, Some(7));
    // JSON: a number from 1, or "TOP" in any case
    let read = |json: &str| serde_json::from_str::<JobRequest>(json).map(|r| r.slurm.priority);
    assert_eq!(
        read(r#"{"slurm": {"priority": "Top"}}"#).unwrap(),
        Some(TOP_PRIORITY)
    );
    assert_eq!(read(r#"{"slurm": {"priority": 12}}"#).unwrap(), Some(12));
    for bad in ["0", "4294967294", "-3", "\"high\"", "1.5"] {
        let json = format!(r#"{{"slurm": {{"priority": {bad}}}}}"#);
        let error = read(&json).unwrap_err().to_string();
        assert!(
            error.contains("a priority is a whole number"),
            "{bad}: {error}"
        );
    }
    let bad: JobRequest = serde_json::from_str(r#"{"slurm": {"extra": "a\nb"}}"#).unwrap();
    assert!(bad.validate().is_err());
}

/// `--tres-per-task`: `cpu` is `-c`, `gres/gpu[:TYPE]` is `--gpus-per-task`, in 24.05's and
/// 23.11's spellings; the same request as those options. Beside them (from any option place),
/// beside `--cpus-per-gpu` or `--ntasks-per-gpu`, refused as sbatch refuses them; a later list
/// replaces an earlier one; from `SBATCH_TRES_PER_TASK` an option's `-c` or
/// `--gpus-per-task` wins.
#[test]
fn tres_per_task_is_cpus_and_gpus_per_task() {
    let gpus = |kind: Option<&str>, count: u32| {
        Some(GpuRequest {
            count,
            kind: kind.map(str::to_string),
            per: GpuPer::PerTask,
        })
    };
    for (list, cpus, gpu) in [
        ("cpu=4", 4, None),
        ("cpu:4", 4, None),
        ("gres/gpu=2", 1, gpus(None, 2)),
        ("gres/gpu:a100=2", 1, gpus(Some("a100"), 2)),
        ("gres/gpu:2", 1, gpus(None, 2)),
        ("gres:gpu:a100:2", 1, gpus(Some("a100"), 2)),
        ("cpu=3,gres/gpu=1", 3, gpus(None, 1)),
        ("gres/gpu:h100=1,cpu:2", 2, gpus(Some("h100"), 1)),
    ] {
        let option = format!("--tres-per-task={list}");
        let r = parse_ok(&["-n", "2", &option]);
        assert_eq!(
            (r.cpus_per_task, r.cpus_per_task_given),
            (cpus, list.contains("cpu")),
            "{list}"
        );
        assert_eq!(r.gpus, gpu, "{list}");
        // the same request as sbatch's other options give
        let mut same = vec!["-n".to_string(), "2".to_string()];
        if list.contains("cpu") {
            same.push(format!("-c{cpus}"));
        }
        if let Some(g) = &gpu {
            same.push(match &g.kind {
                Some(kind) => format!("--gpus-per-task={kind}:{}", g.count),
                None => format!("--gpus-per-task={}", g.count),
            });
        }
        let words: Vec<&str> = same.iter().map(String::as_str).collect();
        assert_eq!(r, parse_ok(&words), "{list}");
    }
    refuses_values(
        "--tres-per-task",
        &[
            "",
            "cpu=0",
            "cpu=2,cpu=3",
            "CPU=4",
            "cpu=2k",
            "mem=4G",
            "license/matlab=1",
            "gres/shard=1",
            "gpu:2",
            "gres/gpu",
            "gres/gpu=1,gres/gpu:a100=1",
        ],
    );
    for (words, says) in [
        (
            &["-c", "2", "--tres-per-task=cpu=2"][..],
            "with cpu= and -c",
        ),
        (
            &["--tres-per-task=cpu=2", "--cpus-per-gpu=2", "--gpus=1"],
            "with cpu= and --cpus-per-gpu",
        ),
        (
            &["-n", "2", "--gpus-per-task=1", "--tres-per-task=gres/gpu=1"],
            "with gres/gpu and --gpus-per-task",
        ),
        (
            &["--gpus=2", "--ntasks-per-gpu=1", "--tres-per-task=cpu=2"],
            "with --ntasks-per-gpu",
        ),
    ] {
        let error = parse(words).unwrap_err().to_string();
        assert!(error.contains(says), "{words:?}: {error}");
    }
    // the script's -c against the command line's list: refused too (both are options)
    let script = "#!/bin/sh\n#SBATCH -c 2\n#SBATCH --tres-per-task=cpu=8\nhostname\n";
    let error = parse_sbatch(&args(&["--tres-per-task=cpu=4"]), Some(script)).unwrap_err();
    assert!(error.to_string().contains("with cpu= and -c"), "{error}");
    // a later list replaces an earlier one whole: the command line's the script's
    let script = "#!/bin/sh\n#SBATCH --tres-per-task=cpu=8\nhostname\n";
    let r = parse_sbatch(
        &args(&["-n", "2", "--tres-per-task=gres/gpu=1"]),
        Some(script),
    )
    .unwrap();
    assert_eq!((r.cpus_per_task, r.gpus.map(|g| g.count)), (1, Some(1)));
    let r = parse_ok(&["--tres-per-task=cpu=8", "--tres-per-task=cpu=2"]);
    assert_eq!(r.cpus_per_task, 2);
    // from the environment: between the script and the command line, and the options' -c or
    // --gpus-per-task win over its entries
    let with_env = |cli: &[&str], script: &str, list: &str| {
        let env = vec![(
            "SBATCH_TRES_PER_TASK".to_string(),
            format!("--tres-per-task={list}"),
        )];
        parse_sbatch_command_with_env(&args(cli), &env, Some(script)).map(|c| c.request)
    };
    let r = with_env(&["-n", "2"], script, "cpu=3,gres/gpu=1").unwrap();
    assert_eq!((r.cpus_per_task, r.gpus.map(|g| g.count)), (3, Some(1)));
    let r = with_env(&["-n", "2", "-c", "5"], SCRIPT, "cpu=3,gres/gpu=1").unwrap();
    assert_eq!((r.cpus_per_task, r.gpus.map(|g| g.count)), (5, Some(1)));
    let r = with_env(
        &["-n", "2", "--gpus-per-task=2"],
        SCRIPT,
        "cpu=3,gres/gpu=1",
    )
    .unwrap();
    assert_eq!((r.cpus_per_task, r.gpus.map(|g| g.count)), (3, Some(2)));
    let r = with_env(&["-n", "2", "--tres-per-task=cpu=6"], SCRIPT, "gres/gpu=1").unwrap();
    assert_eq!((r.cpus_per_task, r.gpus), (6, None));
    let error = with_env(&[], SCRIPT, "cpu=x").unwrap_err().to_string();
    assert!(
        error.starts_with("SBATCH_TRES_PER_TASK in the environment"),
        "{error}"
    );
    // an empty variable is an empty list: the script's is gone
    let empty = vec![(
        "SBATCH_TRES_PER_TASK".to_string(),
        "!--tres-per-task".to_string(),
    )];
    let r = parse_sbatch_command_with_env(&args(&[]), &empty, Some(script))
        .unwrap()
        .request;
    assert_eq!(r.cpus_per_task, 1);
    // GPUs one way in one place, and with a task count, as --gpus-per-task
    for (words, says) in [
        (
            &["-n", "4", "--gres=gpu:2", "--tres-per-task=gres/gpu=1"][..],
            "--tres-per-task=gres/gpu",
        ),
        (
            &["-n", "4", "--gpus=2", "--tres-per-task=gres/gpu=1"],
            "--tres-per-task=gres/gpu",
        ),
        (&["--tres-per-task=gres/gpu=1"], "need a task count"),
        (&["--gpus-per-task=1"], "need a task count"),
        // as sbatch 22.05.8 and 24.11.5: a node list is no task count
        (&["-w", "n[1-2]", "--gpus-per-task=1"], "need a task count"),
    ] {
        let error = parse(words).unwrap_err().to_string();
        assert!(error.contains(says), "{words:?}: {error}");
    }
    for words in [
        &["-N", "2", "--gpus-per-task=1"][..],
        &["-N", "2", "--tres-per-task=gres/gpu=1"],
    ] {
        assert_eq!(
            parse_ok(words).total_gpus(),
            2,
            "{words:?}: a task per node"
        );
    }
    // the command line's GPUs replace the script's list's, as they replace its --gpus-per-task
    let script = "#!/bin/sh\n#SBATCH -n 2 --tres-per-task=gres/gpu=1\nhostname\n";
    let r = parse_sbatch(&args(&["--gpus=3"]), Some(script)).unwrap();
    assert_eq!(r.gpus.map(|g| (g.count, g.per)), Some((3, GpuPer::PerJob)));
}

/// Texts longer than slurmctld keeps (1024 bytes; paths 4096) are refused before anything is
/// held, naming the option, in JSON as from sbatch's options; at the limit they are taken.
#[test]
fn texts_longer_than_slurm_keeps_are_refused() {
    let long = |n: usize| "a".repeat(n);
    for (option, max) in [
        ("--job-name", 1024),
        ("--comment", 1024),
        ("--constraint", 1024),
        ("--extra", 1024),
        ("--mcs-label", 1024),
        ("--wckey", 1024),
        ("--reservation", 1024),
        ("--prefer", 1024),
        ("--account", 1024),
        ("--qos", 1024),
        ("--output", 4096),
        ("--chdir", 4096),
        ("--input", 4096),
    ] {
        let fits = format!("{option}={}", long(max));
        let request = parse_ok(&[fits.as_str()]);
        assert!(request.validate().is_ok(), "{option} of {max} bytes");
        let over = format!("{option}={}", long(max + 1));
        let error = parse(&[over.as_str()])
            .and_then(|r| r.validate().map(|()| r))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(&format!(
                "{} bytes long: Slurm refuses more than {max}",
                max + 1
            )),
            "{option}: {error}"
        );
    }
    // the array's indexes (4096 bytes) and the licenses (1024, as sent) are held to theirs
    // when read
    let indexes = |n: usize| {
        (0..n)
            .map(|i| (i * 2).to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    let fits = (1..2000).rev().find(|n| indexes(*n).len() <= 4096).unwrap();
    let array = format!("--array={}", indexes(fits));
    assert!(
        parse(&[array.as_str()]).is_ok(),
        "{} bytes",
        indexes(fits).len()
    );
    let array = format!("--array={}", indexes(fits + 1));
    let error = parse(&[array.as_str()]).unwrap_err().to_string();
    assert!(error.contains("Slurm takes at most 4096"), "{error}");
    let licenses = format!(
        "-L{}",
        (0..200)
            .map(|i| format!("lic{i}:1"))
            .collect::<Vec<_>>()
            .join(",")
    );
    let error = parse(&[licenses.as_str()]).unwrap_err().to_string();
    assert!(error.contains("more than the 1024 Slurm takes"), "{error}");
    let json = format!(r#"{{"slurm": {{"extra": "{}"}}}}"#, long(1025));
    let r: JobRequest = serde_json::from_str(&json).unwrap();
    assert!(r
        .validate()
        .unwrap_err()
        .to_string()
        .contains("--extra is 1025 bytes long"));
    // bytes, as slurmctld counts them: 512 two-byte characters fit, 513 do not
    let name = |n: usize| JobRequest {
        job_name: Some("é".repeat(n)),
        ..JobRequest::default()
    };
    assert!(name(512).validate().is_ok());
    assert!(name(513).validate().is_err());
}

/// `--exclusive=user|mcs|topo`: one setting with `--exclusive` and `-s`, as sbatch's `shared`
/// (the later in one place, the command line's over the environment's over the script's);
/// priced as without it, with a note; `exclusive` and `oversubscribe` its other values.
#[test]
fn exclusive_modes_share_one_setting_with_exclusive_and_oversubscribe() {
    let plain = parse_ok(&[]);
    for (word, mode) in [
        ("user", ExclusiveMode::User),
        ("MCS", ExclusiveMode::Mcs),
        ("Topo", ExclusiveMode::Topo),
    ] {
        let option = format!("--exclusive={word}");
        let r = parse_ok(&[&option]);
        assert_eq!(r.slurm.exclusive, Some(mode), "{word}");
        assert!(!r.exclusive && !r.slurm.oversubscribe, "{word}");
        assert_eq!(r.whole_nodes(&PartitionDefaults::default()), None, "{word}");
        assert_eq!(r.alloc(), plain.alloc(), "{word}: not priced");
        let command = parse_sbatch_command(&args(&[&option]), Some(SCRIPT)).unwrap();
        assert!(
            command.notes.iter().any(|n| n.starts_with(mode.option())
                && n.contains("charges the job only what it asks for")),
            "{:?}",
            command.notes
        );
        slurm_options_round_trip(
            &r,
            &[mode.option()],
            serde_json::json!({"exclusive": mode.as_str()}),
        );
    }
    // its other values are --exclusive and -s
    for word in ["Exclusive", "allocation"] {
        let whole = parse_ok(&[&format!("--exclusive={word}")]);
        assert!(whole.exclusive && whole.slurm.exclusive.is_none(), "{word}");
    }
    let shared = parse_ok(&["--exclusive=oversubscribe"]);
    assert!(shared.slurm.oversubscribe && !shared.exclusive && shared.slurm.exclusive.is_none());
    for bad in ["--exclusive=yes", "--exclusive=1", "--exclusive="] {
        assert!(
            matches!(
                parse(&[bad]),
                Err(RequestError::InvalidValue { ref reason, .. })
                    if reason.contains("user, mcs or topo")
            ),
            "{bad}"
        );
    }
    // the later in one place
    let last = parse_ok(&["--exclusive=user", "-s"]);
    assert!(last.slurm.oversubscribe && last.slurm.exclusive.is_none());
    let last = parse_ok(&["--exclusive", "--exclusive=mcs"]);
    assert!(!last.exclusive && last.slurm.exclusive == Some(ExclusiveMode::Mcs));
    // the command line's over the environment's over the script's
    let script = "#!/bin/sh\n#SBATCH --exclusive\nsrun ./app\n";
    let with_env = |cli: &[&str], value: &str| {
        let env = [(
            "SBATCH_EXCLUSIVE".to_string(),
            format!("--exclusive={value}"),
        )];
        parse_sbatch_command_with_env(&args(cli), &env, Some(script))
            .unwrap()
            .request
    };
    let r = with_env(&[], "user");
    assert!(!r.exclusive && r.slurm.exclusive == Some(ExclusiveMode::User));
    let r = with_env(&["-s"], "user");
    assert!(r.slurm.oversubscribe && r.slurm.exclusive.is_none());
    let r = with_env(&[], "oversubscribe");
    assert!(
        r.slurm.oversubscribe && !r.exclusive,
        "over the script's --exclusive"
    );
    // in JSON, a mode beside whole nodes or shared CPUs is a contradiction
    for (json, says) in [
        (
            r#"{"exclusive": true, "slurm": {"exclusive": "user"}}"#,
            "--exclusive=user and --exclusive (whole nodes)",
        ),
        (
            r#"{"slurm": {"exclusive": "topo", "oversubscribe": true}}"#,
            "--exclusive=topo and --oversubscribe",
        ),
    ] {
        let both: JobRequest = serde_json::from_str(json).unwrap();
        let error = both.validate().unwrap_err().to_string();
        assert!(error.contains(says), "{error}");
    }
    assert!(serde_json::from_str::<JobRequest>(r#"{"slurm": {"exclusive": "yes"}}"#).is_err());
    // --get-user-env: for the client; its value checked as sbatch's strtol reads it
    for words in [
        &["--get-user-env"][..],
        &["--get-user-env=10"],
        &["--get-user-env=10L"],
        &["--get-user-env=s"],
    ] {
        let command = parse_sbatch_command(&args(words), Some(SCRIPT)).unwrap();
        assert!(command.get_user_env, "{words:?}");
    }
    assert!(
        !parse_sbatch_command(&args(&[]), Some(SCRIPT))
            .unwrap()
            .get_user_env
    );
    for (words, has) in [
        (
            &["--gres-flags=enforce"][..],
            "use enforce-binding or disable-binding",
        ),
        (&["--gres-flags=one-task-per-sharing"], "sharing flags"),
        (
            &["--gres-flags=enforce-binding,one-task-per-sharing"],
            "sharing flags",
        ),
        (&["--acctg-freq=xtask=5"], "is not an interval"),
        (&["--acctg-freq=30s"], "is not an interval"),
        (&["--acctg-freq=task=30,"], "is not an interval"),
        (&["--acctg-freq=0"], "refuses a task interval of 0"),
        (
            &["--acctg-freq=energy=5,Task=00"],
            "refuses a task interval of 0",
        ),
        (
            &["--get-user-env=10x"],
            "use seconds, optionally followed by S or L",
        ),
    ] {
        let error = parse(words).unwrap_err().to_string();
        assert!(error.contains(has), "{words:?}: {error}");
    }
    let error = serde_json::from_str::<JobRequest>(r#"{"slurm": {"acctg_freq": "often"}}"#)
        .unwrap()
        .validate()
        .unwrap_err()
        .to_string();
    assert!(error.contains("is not an interval"), "{error}");
}

/// `-m/--distribution`, `--mem-bind`, `--gpu-bind`: read as sbatch reads them (checked, kept
/// as given), not priced; the command line's over the script's; sbatch's plane check.
#[test]
fn layouts_and_bindings_are_read_as_sbatch_reads_them_and_not_priced() {
    let r = parse_ok(&[
        "-m",
        "Block:*",
        "--mem-bind=v,local",
        "--gpu-bind=closest",
        "-G",
        "1",
    ]);
    assert_eq!(r.slurm.distribution.as_deref(), Some("Block:*"));
    assert_eq!(r.slurm.mem_bind.as_deref(), Some("v,local"));
    assert_eq!(r.slurm.gpu_bind.as_deref(), Some("closest"));
    assert_eq!(r.alloc(), parse_ok(&["-G", "1"]).alloc(), "not priced");
    slurm_options_round_trip(
        &r,
        &["--distribution", "--mem-bind", "--gpu-bind"],
        serde_json::json!({"distribution": "Block:*", "mem_bind": "v,local",
            "gpu_bind": "closest"}),
    );
    // the command line's over the script's
    let script = "#!/bin/sh\n#SBATCH --distribution=cyclic\n#SBATCH --mem-bind=none\nsrun ./app\n";
    let both = parse_sbatch(&args(&["--distribution=plane=2", "-n", "4"]), Some(script)).unwrap();
    assert_eq!(both.slurm.distribution.as_deref(), Some("plane=2"));
    assert_eq!(both.slurm.mem_bind.as_deref(), Some("none"));
    assert_eq!(both.plane_size(), Some(2));
    // --mem-bind again: sbatch keeps the flags and takes the later binding
    let script = "#!/bin/sh\n#SBATCH --mem-bind=v,local\n#SBATCH --mem-bind=p\nsrun ./app\n";
    let twice = parse_sbatch(&args(&["--mem-bind=rank"]), Some(script)).unwrap();
    assert_eq!(twice.slurm.mem_bind.as_deref(), Some("v,local,p,rank"));
    assert_eq!(
        bursar_gateway::request::layout::parse_mem_bind("v,local,p,rank")
            .unwrap()
            .binding
            .as_deref(),
        Some("verbose,prefer,rank")
    );
    for (words, has) in [
        (&["-m", "arbitrary"][..], "host file"),
        (&["-m", "plane"], "plane=N"),
        (&["--distribution=fcyclic"], "is not a layout"),
        (&["-m", "pack,nopack"], "one of pack and nopack"),
        (&["-m", "block,pack,nopack"], "is not a layout"),
        // sbatch: "Too few processes for the requested {plane,node} distribution"
        (
            &["-N", "2", "-n", "4", "-m", "plane=4"],
            "leave a node of the 2 without tasks",
        ),
        (&["--mem-bind=help"], "the memory bindings are"),
        (&["--mem-bind=map_mem"], "give the list"),
        (&["--mem-bind=bind"], "is not a memory binding"),
        (&["--mem-bind=sort,local"], "gone from Slurm 25.11"),
        // from 24.05 a node takes at most a plane of a GRES job's tasks
        (
            &["-n", "4", "-G", "1", "-m", "plane=2"],
            "need 2 nodes; pass -N 2",
        ),
        (&["--gpu-bind=verbose"], "is not a GPU binding"),
        (&["--gpu-bind=map:0,1"], "is not a GPU binding"),
        (&["--gpu-freq=Medium"], "is not a GPU frequency"),
        (&["--gpu-freq=450MHz"], "is not a GPU frequency"),
        (&["--gpu-freq=graphics=1000"], "is not a GPU frequency"),
        (&["--gpu-freq=memory="], "is not a GPU frequency"),
        (&["--gpu-freq=medium,,verbose"], "a stray comma"),
        (&["--gpu-freq=verbose=1"], "is not a GPU frequency"),
        (
            &["--gres=gpu:1,shard:2", "--gpu-freq=high"],
            "cannot set the clocks of GPUs a job shares",
        ),
    ] {
        let error = parse(words).unwrap_err().to_string();
        assert!(error.contains(has), "{words:?}: {error}");
    }
    assert!(parse(&["-N", "2", "-n", "6", "-m", "plane=4"]).is_ok());
    // --cpu-freq: what 22.05 and 23.11 read differently, and what neither reads
    let cpu_freq_refusals = [
        ("1800000-2400000", "a range needs a governor"),
        ("2400000:UserSpace", "means one thing to Slurm 22.05"),
        ("1-2:UserSpace", "takes one frequency, not a range"),
        ("2-1:OnDemand", "minimum is above its maximum"),
        ("low-high:OnDemand", "a range is two frequencies in kHz"),
        ("0", "is not a CPU frequency"),
        ("2.4GHz", "is not a CPU frequency"),
        ("turbo", "is not a CPU frequency"),
    ];
    for (value, has) in cpu_freq_refusals {
        let error = parse(&["--cpu-freq", value]).unwrap_err().to_string();
        assert!(error.contains(has), "--cpu-freq={value}: {error}");
    }
    // --cpu-freq in Slurm's own spelling (cpu_freq_to_cmdline), as sent and exported
    for (given, sent) in [
        ("2400000", "2400000"),
        ("high", "High"),
        ("HIGHM1", "Highm1"),
        ("userspace", "UserSpace"),
        ("ondemand", "OnDemand"),
        ("1800000-2400000:performance", "1800000-2400000:Performance"),
        ("2400000-2400000:SchedUtil", "2400000-2400000:SchedUtil"),
    ] {
        let r = parse_ok(&["--cpu-freq", given]);
        assert_eq!(r.slurm.cpu_freq.as_deref(), Some(given));
        assert_eq!(
            bursar_gateway::request::cpu_freq_request(given).as_deref(),
            Ok(sent)
        );
        assert_eq!(r.alloc(), parse_ok(&[]).alloc(), "not priced");
    }
    let freq = parse_ok(&["--gpu-freq=1410,memory=highm1,verbose", "-G", "1"]);
    assert_eq!(
        freq.slurm.gpu_freq.as_deref(),
        Some("1410,memory=highm1,verbose")
    );
    assert_eq!(freq.alloc(), parse_ok(&["-G", "1"]).alloc(), "not priced");
    assert!(parse(&["-N", "2", "-n", "4", "-G", "2", "-m", "plane=2"]).is_ok());
    for (json, has) in [
        (
            r#"{"slurm": {"distribution": "sideways"}}"#,
            "is not a layout",
        ),
        (
            r#"{"nodes": 3, "ntasks": 3, "slurm": {"distribution": "plane=2"}}"#,
            "leave a node of the 3 without tasks",
        ),
        (
            r#"{"slurm": {"mem_bind": "tight"}}"#,
            "is not a memory binding",
        ),
        (
            r#"{"slurm": {"gpu_bind": "nearest"}}"#,
            "is not a GPU binding",
        ),
    ] {
        let error = serde_json::from_str::<JobRequest>(json)
            .unwrap()
            .validate()
            .unwrap_err()
            .to_string();
        assert!(error.contains(has), "{json}: {error}");
    }
}

#[test]
fn splits_argv_like_sbatch() {
    let split = split_sbatch_args(&args(&["-A", "physics", "job.sh", "--foo", "-N", "2"])).unwrap();
    assert_eq!(split.options, args(&["-A", "physics"]));
    assert_eq!(split.script.as_deref(), Some("job.sh"));
    assert_eq!(split.script_args, args(&["--foo", "-N", "2"]));

    let split = split_sbatch_args(&args(&[
        "-Aphysics",
        "--time",
        "10",
        "-Qv",
        "--mem=1G",
        "job.sh",
    ]))
    .unwrap();
    assert_eq!(split.options.len(), 5);
    assert_eq!(split.script.as_deref(), Some("job.sh"));

    let split = split_sbatch_args(&args(&["--wrap", "hostname", "-N", "2"])).unwrap();
    assert_eq!((split.options.len(), split.script), (4, None));

    let split = split_sbatch_args(&args(&["-J", "x", "--", "-weird.sh", "a"])).unwrap();
    assert_eq!(split.script.as_deref(), Some("-weird.sh"));
    assert_eq!(split.script_args, args(&["a"]));

    assert!(matches!(
        split_sbatch_args(&args(&["--overcommit", "job.sh"])),
        Err(RequestError::UnsupportedOption { .. })
    ));
    let split = split_sbatch_args(&args(&["--hint", "nomultithread", "job.sh"])).unwrap();
    assert_eq!(split.script.as_deref(), Some("job.sh"));
    // the pieces feed parse_sbatch
    let split = split_sbatch_args(&args(&["-A", "physics", "-t", "5", "job.sh"])).unwrap();
    let r = parse_sbatch(&split.options, Some(SCRIPT)).unwrap();
    assert_eq!(
        (r.account.as_deref(), r.time_limit_min),
        (Some("physics"), Some(5))
    );
}

#[test]
fn job_arrays_from_the_command_line_the_script_and_the_environment() {
    let array = |r: &JobRequest| r.array.as_ref().map(|a| a.as_slurm().to_string());
    let script =
        "#!/bin/sh\n#SBATCH --array=1-4\n#SBATCH -J arr\nsrun ./task $SLURM_ARRAY_TASK_ID\n";
    let from_script = parse_sbatch(&[], Some(script)).unwrap();
    assert_eq!(array(&from_script).as_deref(), Some("1-4"));
    let spec = from_script.array.as_ref().unwrap();
    assert_eq!((spec.tasks(), spec.max_running()), (4, None));
    assert_eq!(spec.indexes().collect::<Vec<_>>(), [1, 2, 3, 4]);
    // The array does not change the shape of each task's job.
    assert_eq!(from_script.alloc(), parse_ok(&[]).alloc());
    // The command line wins over the script, and -a takes the next word (also when splitting).
    let merged = parse_sbatch(&args(&["-a", "0-9%2"]), Some(script)).unwrap();
    assert_eq!(array(&merged).as_deref(), Some("0-9%2"));
    assert_eq!(merged.array.as_ref().unwrap().max_running(), Some(2));
    let split = split_sbatch_args(&args(&["-a", "1-3", "job.sh", "x"])).unwrap();
    assert_eq!(
        (split.options, split.script.as_deref()),
        (args(&["-a", "1-3"]), Some("job.sh"))
    );
    // SBATCH_ARRAY_INX, which `bursar submit` reads as sbatch does: over the script, under the
    // command line.
    let env = |value: &str| vec![("SBATCH_ARRAY_INX".to_string(), format!("--array={value}"))];
    let with_env = |cli: &[&str], value: &str| {
        parse_sbatch_command_with_env(&args(cli), &env(value), Some(script)).map(|c| c.request)
    };
    assert_eq!(
        array(&with_env(&[], "7,9%1").unwrap()).as_deref(),
        Some("7,9%1")
    );
    assert_eq!(
        array(&with_env(&["--array=2-3"], "7,9%1").unwrap()).as_deref(),
        Some("2-3")
    );
    let error = with_env(&[], "9-7").unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("SBATCH_ARRAY_INX in the environment: invalid --array value \"9-7\""),
        "{error}"
    );
    // Written back as a #SBATCH line, and as JSON: the sbatch text, left out when absent.
    assert!(merged
        .to_sbatch_lines()
        .contains(&"#SBATCH --array=0-9%2".to_string()));
    let json = serde_json::to_value(&merged).unwrap();
    assert_eq!(json["array"], serde_json::json!("0-9%2"));
    let back: JobRequest = serde_json::from_value(json).unwrap();
    assert_eq!(back, merged);
    let plain = serde_json::to_value(parse_ok(&[])).unwrap();
    assert!(plain.get("array").is_none(), "{plain}");
    // A JSON body is checked with the same messages.
    let r: JobRequest = serde_json::from_str(r#"{"array": "[0-5:2]%2"}"#).unwrap();
    assert_eq!(r.array.as_ref().map(ArraySpec::tasks), Some(3));
    for (bad, has) in [
        (
            r#"{"array": "3-1"}"#,
            "invalid --array value \"3-1\": the range ends",
        ),
        (r#"{"array": ""}"#, "no task indexes"),
        (r#"{"array": "0-3%0"}"#, "%0 sets no limit"),
        (r#"{"array": 3}"#, "expected a string"),
    ] {
        let error = serde_json::from_str::<JobRequest>(bad).unwrap_err();
        assert!(error.to_string().contains(has), "{bad}: {error}");
    }
    // A dstack task has no arrays.
    let mut task: JobRequest = serde_json::from_value(serde_json::json!({"dstack": {
        "type": "task", "name": "train", "commands": ["python train.py"]
    }}))
    .unwrap();
    task.array = Some(ArraySpec::parse("0-3").unwrap());
    let error = task.validate().unwrap_err();
    assert!(
        error.to_string().contains("dstack has no job arrays"),
        "{error}"
    );
}

#[test]
fn json_shape_and_defaults() {
    let r: JobRequest = serde_json::from_str(r#"{"account": "physics", "nodes": 2}"#).unwrap();
    assert_eq!((r.nodes, r.ntasks, r.cpus_per_task), (2, 2, 1));
    // `nodes` in JSON is sbatch's -N unless `nodes_exact` says the client only derived it.
    assert!(r.nodes_exact);
    let r: JobRequest = serde_json::from_str(r#"{"nodes": 1, "ntasks": 8}"#).unwrap();
    assert!(r.nodes_exact);
    let r: JobRequest = serde_json::from_str(r#"{"ntasks": 8}"#).unwrap();
    assert!(!r.nodes_exact && !r.cpus_per_task_given);
    // `nodes_exact`, which clients of one version sent, is still read (and never sent).
    let r: JobRequest =
        serde_json::from_str(r#"{"nodes": 1, "nodes_exact": false, "ntasks": 8}"#).unwrap();
    assert!(!r.nodes_exact);
    assert!(serde_json::to_value(&r)
        .unwrap()
        .get("nodes_exact")
        .is_none());
    let r: JobRequest = serde_json::from_str(r#"{"cpus_per_task": 1}"#).unwrap();
    assert!(r.cpus_per_task_given);
    // What `bursar submit` sends says what was asked for, and the server reads it back the
    // same: a node count only for -N N, a CPU count only for -c.
    for (words, nodes, cpus) in [
        (&["-n", "8"][..], None, None),
        (&["-N", "1", "-n", "8"][..], Some(1), None),
        (&["-N", "1-4", "-n", "8"][..], Some(1), None),
        (&["-N", "2-4", "-n", "8"][..], Some(2), None),
        (&["-n", "8", "--ntasks-per-node=2"][..], None, None),
        (&["-c", "1"][..], None, Some(1)),
    ] {
        let parsed = parse_ok(words);
        let json = serde_json::to_value(&parsed).unwrap();
        assert_eq!(
            json.get("nodes").and_then(|n| n.as_u64()),
            nodes,
            "{words:?}"
        );
        assert_eq!(
            json.get("cpus_per_task").and_then(|n| n.as_u64()),
            cpus,
            "{words:?}"
        );
        let sent: JobRequest = serde_json::from_value(json).unwrap();
        assert_eq!(sent, parsed, "{words:?}");
    }
    r.validate().unwrap();
    let r: JobRequest =
        serde_json::from_str(r#"{"nodes": 2, "ntasks_per_node": 4, "cpus_per_task": 2}"#).unwrap();
    assert_eq!(r.alloc(), Tres::parse("cpu=16,node=2").unwrap());
    // Without nodes: the nodes the tasks need at ntasks_per_node each, as the sbatch parser.
    let r: JobRequest = serde_json::from_str(r#"{"ntasks": 7, "ntasks_per_node": 2}"#).unwrap();
    assert_eq!((r.nodes, r.ntasks), (4, 7));
    let parsed = parse_ok(&["-n", "7", "--ntasks-per-node=2"]);
    assert_eq!((parsed.nodes, parsed.ntasks), (r.nodes, r.ntasks));
    let r: JobRequest = serde_json::from_str(
        r#"{"memory": {"per_cpu_mb": 2048}, "gpus": {"count": 2, "kind": "a100"}, "time_limit_min": 60}"#,
    )
    .unwrap();
    assert_eq!(r.memory, Some(MemoryRequest::PerCpu(2048)));
    assert_eq!(r.gpus, gpus(2, GpuPer::PerNode, Some("a100")));
    let r: JobRequest = serde_json::from_str(r#"{}"#).unwrap();
    assert_eq!(r, JobRequest::default());
    assert_eq!(serde_json::to_string(&r).unwrap(), r#"{"ntasks":1}"#);

    let full = parse_ok(&["-A", "p", "-N", "2", "--gpus=a100:3", "--mem=4G", "-t", "5"]);
    let json = serde_json::to_value(&full).unwrap();
    assert_eq!(
        json["gpus"],
        serde_json::json!({"count": 3, "per": "job", "kind": "a100"})
    );
    assert_eq!(json["memory"], serde_json::json!({"per_node_mb": 4096}));
    let back: JobRequest = serde_json::from_value(json).unwrap();
    assert_eq!(back, full);

    // A script's path and arguments round-trip, and belong to a script alone.
    let r: JobRequest = serde_json::from_str(
        r##"{"script": "#!/bin/sh\ntrue\n", "script_path": "/home/a/job.sh", "script_args": ["in.dat", "", "a\nb"]}"##,
    )
    .unwrap();
    r.validate().unwrap();
    assert_eq!(r.script_args, ["in.dat", "", "a\nb"]);
    let back: JobRequest = serde_json::from_value(serde_json::to_value(&r).unwrap()).unwrap();
    assert_eq!(back, r);
    let plain = serde_json::to_value(parse_ok(&[])).unwrap();
    assert!(plain.get("script_args").is_none() && plain.get("script_path").is_none());
    // A file name may hold a line break: only NUL is refused.
    let odd: JobRequest =
        serde_json::from_str(r##"{"script": "#!/bin/sh\n", "script_path": "/a\nb.sh"}"##).unwrap();
    odd.validate().unwrap();
    for (bad, message) in [
        (
            r#"{"wrap": "true", "script_args": ["x"]}"#,
            "Script arguments not permitted with --wrap option",
        ),
        (
            r#"{"wrap": "true", "script_path": "/a.sh"}"#,
            "Script arguments not permitted with --wrap option",
        ),
        (
            r#"{"dstack": {"type": "task", "commands": ["true"]}, "script_args": ["x"]}"#,
            "belong to a batch script",
        ),
        (
            r##"{"script": "#!/bin/sh\n", "script_args": ["a\u0000b"]}"##,
            "NUL",
        ),
        (
            r##"{"script": "#!/bin/sh\n", "script_path": "/a\u0000b.sh"}"##,
            "without NUL",
        ),
        (
            r##"{"script": "#!/bin/sh\n", "script_path": ""}"##,
            "script_path",
        ),
    ] {
        let r: JobRequest = serde_json::from_str(bad).unwrap();
        let error = r.validate().unwrap_err().to_string();
        assert!(error.contains(message), "{bad}: {error}");
    }

    for bad in [
        r#"{"nodez": 2}"#,
        r#"{"memory": {"per_node": 1}}"#,
        r#"{"gpus": {"count": 1, "per": "socket"}}"#,
    ] {
        assert!(serde_json::from_str::<JobRequest>(bad).is_err(), "{bad}");
    }
}

#[test]
fn validate_explains() {
    let check = |f: fn(&mut JobRequest), has: &str| {
        let mut r = JobRequest::default();
        f(&mut r);
        let error = r.validate().unwrap_err();
        assert!(error.to_string().contains(has), "{error}");
    };
    check(
        |r| r.cpus_per_task = 0,
        "--cpus-per-task must be at least 1",
    );
    check(|r| r.nodes = 0, "--nodes must be at least 1");
    check(|r| r.ntasks = 0, "--ntasks must be at least 1");
    check(
        |r| (r.nodes, r.ntasks) = (4, 2),
        "--ntasks (2) is less than --nodes (4)",
    );
    check(
        |r| r.gpus = gpus(1, GpuPer::PerNode, Some("a 100")),
        "unknown GPU spec",
    );
    check(|r| r.gpus = gpus(0, GpuPer::PerNode, None), "0 GPUs");
    check(
        |r| r.memory = Some(MemoryRequest::PerCpu(0)),
        "--mem-per-cpu must be at least 1",
    );
    check(|r| r.time_limit_min = Some(0), "at least 1 minute");
    check(
        |r| (r.time_limit_min, r.time_unlimited) = (Some(5), true),
        "exclude each other",
    );
    check(
        |r| r.mail_type = Some("END,SOMETIMES".into()),
        "\"SOMETIMES\" is not a mail type",
    );
    check(
        |r| (r.nodes, r.ntasks, r.ntasks_per_node) = (2, 16, Some(4)),
        "--ntasks=16 does not fit on 2 node(s) at --ntasks-per-node=4",
    );
    check(
        |r| r.partition = Some("batch,debug".into()),
        "is a list: bursar prices and submits a job to one partition",
    );
    check(|r| r.other_gres = vec!["gpu:2".into()], "non-GPU GRES");
    check(
        |r| r.clusters = vec!["a".into(), "a".into()],
        "listed twice",
    );
    check(|r| r.job_name = Some("two\nlines".into()), "one line");
    check(
        |r| (r.script, r.wrap) = (Some(SCRIPT.into()), Some("x".into())),
        "at most one",
    );
    check(
        |r| r.script = Some("echo\n".into()),
        "does not look like a batch script",
    );
    check(
        |r| (r.nodes, r.ntasks, r.memory) = (2, 2, Some(MemoryRequest::PerNode(u64::MAX))),
        "too large",
    );
    check(
        |r| {
            r.environment.insert("A=B".into(), "x".into());
        },
        "environment variable",
    );
}

fn name() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9_-]{0,8}"
}

/// Free text with the characters that need quoting in `#SBATCH` lines.
fn text() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 #'\"\\\\/%.,=&@:_-]{1,16}"
}

/// A `--mail-type` list sbatch takes: its words, in any case, in any order.
fn mail_types() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            Just("NONE"),
            Just("BEGIN"),
            Just("end"),
            Just("Fail"),
            Just("ALL"),
            Just("TIME_LIMIT_90"),
            Just("INVALID_DEPEND"),
            Just("ARRAY_TASKS"),
        ],
        1..4,
    )
    .prop_map(|words| words.join(","))
}

/// A valid `--array` text: one to three entries (`N`, `N-M`, `N-M:STEP`), perhaps in
/// brackets, perhaps with `%MAX`.
fn array_spec() -> impl Strategy<Value = ArraySpec> {
    (
        proptest::collection::vec(
            (
                0u32..5000,
                proptest::option::of((0u32..300, proptest::option::of(1u32..12))),
            ),
            1..4,
        ),
        any::<bool>(),
        proptest::option::of(1u32..100),
    )
        .prop_map(|(entries, brackets, throttle)| {
            let list: Vec<String> = entries
                .into_iter()
                .map(|(first, range)| match range {
                    None => first.to_string(),
                    Some((span, None)) => format!("{first}-{}", first + span),
                    Some((span, Some(step))) => format!("{first}-{}:{step}", first + span),
                })
                .collect();
            let list = list.join(",");
            let list = if brackets { format!("[{list}]") } else { list };
            let text = match throttle {
                Some(max) => format!("{list}%{max}"),
                None => list,
            };
            ArraySpec::parse(&text).unwrap_or_else(|e| panic!("{text}: {e}"))
        })
}

fn request() -> impl Strategy<Value = JobRequest> {
    let shape = (
        1u32..5,
        0u32..20,
        proptest::option::of(1u32..6),
        1u32..9,
        proptest::option::of(prop_oneof![
            (0u64..100_000).prop_map(MemoryRequest::PerNode),
            (1u64..100_000).prop_map(MemoryRequest::PerCpu),
            (1u64..100_000).prop_map(MemoryRequest::PerGpu),
        ]),
        proptest::option::of((
            1u32..9,
            prop_oneof![
                Just(GpuPer::PerNode),
                Just(GpuPer::PerJob),
                Just(GpuPer::PerTask)
            ],
            proptest::option::of("[a-z][a-z0-9_.]{0,6}"),
            proptest::option::of(1u32..9),
        )),
        proptest::collection::vec("(shard|nvme|mps)(:[0-9]{1,2})?", 0..3),
        prop_oneof![
            (1u64..100_000).prop_map(|m| (Some(m), false)),
            Just((None, false)),
            Just((None, true)),
        ],
    );
    let names = (
        proptest::option::of(name()),
        proptest::option::of(name()),
        proptest::option::of(name()),
        proptest::collection::btree_set(name().prop_filter("not all", |n| n != "all"), 0..3),
        proptest::option::of(array_spec()),
        proptest::option::of(
            proptest::collection::vec(("[a-z][a-z0-9_.-]{0,8}(@[a-z]{1,5})?", 1u32..100), 1..4)
                .prop_map(|entries| {
                    let text: Vec<String> =
                        entries.iter().map(|(n, c)| format!("{n}:{c}")).collect();
                    Licenses::parse(&text.join(",")).unwrap()
                }),
        ),
        proptest::option::of(1u32..9),
        prop_oneof![
            Just((None, None, None)),
            prop_oneof![
                Just("nomultithread"),
                Just("multithread"),
                Just("Compute_Bound;memory_bound")
            ]
            .prop_map(|h| (Some(Hint::parse(h).unwrap()), None, None)),
            // no more tasks per core than threads, as sbatch 24.11 requires
            (1u32..4, proptest::option::of(1u32..4)).prop_map(|(t, k)| (
                None,
                Some(t),
                k.map(|k| k.min(t))
            )),
        ],
    );
    let texts = (
        proptest::option::of(text()),
        proptest::option::of(text()),
        proptest::option::of(text()),
        proptest::option::of(text()),
        proptest::option::of(text()),
        proptest::option::of(mail_types()),
        proptest::option::of(text()),
        proptest::option::of(text()),
        proptest::option::of(text()),
        any::<bool>(),
        any::<bool>(),
    );
    let slurm = (
        proptest::option::of(
            (
                prop_oneof![Just(""), Just("B:"), Just("R:"), Just("rb:")],
                prop_oneof![Just("USR1"), Just("sigterm"), Just("10"), Just("35")],
                proptest::option::of(0u32..=65535),
            )
                .prop_map(|(flags, signal, seconds)| {
                    let at = seconds.map(|s| format!("@{s}")).unwrap_or_default();
                    WarnSignal::parse(&format!("{flags}{signal}{at}")).unwrap()
                }),
        ),
        proptest::option::of(any::<bool>()),
        proptest::option::of(prop_oneof![
            Just(OpenMode::Append),
            Just(OpenMode::Truncate)
        ]),
        proptest::option::of(-2_147_483_644i32..=2_147_483_644),
        proptest::option::of(text()),
        proptest::option::of(text()),
        proptest::option::of("[a-z]{1,4}(\\[[0-9]-[0-9]\\])?(,[a-z]{1,4}[0-9])?"),
        proptest::option::of(text()),
        any::<bool>(),
        proptest::option::of("(afterok|afterany):[0-9]{1,6}(:[0-9]{1,4})?|singleton"),
        proptest::option::of(any::<bool>()),
    );
    let times = (
        proptest::option::of(1_000_000i64..4_000_000_000),
        proptest::option::of(1i64..100_000_000),
        proptest::option::of(1u64..100_000),
        proptest::option::of(0u64..10_000_000),
        proptest::option::of("[a-z]{1,6}(&[a-z]{1,4})?"),
        any::<bool>(),
        (
            any::<bool>(),
            proptest::option::of(prop_oneof![
                Just(GresFlags::EnforceBinding),
                Just(GresFlags::DisableBinding)
            ]),
            proptest::option::of(
                "[1-9][0-9]{0,3}|(task|energy|network|filesystem)=[1-9][0-9]{0,2}(,energy=[0-9])?",
            ),
            proptest::option::of(
                "(block|cyclic|\\*)(:(block|cyclic|fcyclic|\\*))?(,(pack|NoPack))?",
            ),
            proptest::option::of("(v,)?(local|none|rank|map_mem:[0-3](,[0-3])?)"),
            proptest::option::of("(verbose,)?(closest|none|single:[1-4]|map_gpu:[0-3](,[0-3])?)"),
            proptest::option::of(
                "(low|medium|high|[1-9][0-9]{2,3})(,memory=(high|[1-9][0-9]{2,3}))?(,verbose)?",
            ),
            proptest::option::of("[1-9][0-9]{5,6}|High|Performance|1000000-2000000:OnDemand"),
        ),
        (
            proptest::option::of("none|all|(energy|task|lustre|network)(,(Task|NETWORK))?"),
            proptest::option::of("[1-9][0-9]{0,2}(@([0-9]{1,3}|[0-9]{1,2}:[0-5][0-9]|UNLIMITED))?"),
            proptest::option::of(text()),
            proptest::option::of(text()),
            proptest::option::of(prop_oneof![
                Just(ExclusiveMode::User),
                Just(ExclusiveMode::Mcs),
                Just(ExclusiveMode::Topo)
            ]),
            proptest::option::of(any::<bool>()),
            any::<bool>(),
            any::<bool>(),
            proptest::option::of("[1-9][0-9]{0,2}|[0-9]{1,2}:[0-5][0-9]|[1-3]-[0-9]{1,2}"),
            proptest::option::of(text()),
            (
                any::<bool>(),
                proptest::option::of(text()),
                proptest::option::of(prop_oneof![Just(TOP_PRIORITY), 1..=TOP_PRIORITY]),
            ),
        ),
    );
    let slurm = (slurm, times).prop_map(
        |(
            (
                signal,
                requeue,
                open_mode,
                nice,
                reservation,
                wckey,
                exclude,
                input,
                no_kill,
                dependency,
                kill_on_invalid_dep,
            ),
            (
                begin,
                after_begin,
                time_min,
                tmp_mb,
                prefer,
                on_n1,
                (
                    oversubscribe,
                    gres_flags,
                    acctg_freq,
                    distribution,
                    mem_bind,
                    gpu_bind,
                    gpu_freq,
                    cpu_freq,
                ),
                (
                    profile,
                    switches,
                    container,
                    container_id,
                    exclusive,
                    wait_all_nodes,
                    use_min_nodes,
                    spread_job,
                    delay_boot,
                    mcs_label,
                    (contiguous, extra, priority),
                ),
            ),
        )| SlurmOptions {
            signal,
            requeue,
            open_mode,
            nice,
            reservation,
            wckey,
            exclude,
            input,
            no_kill,
            dependency,
            kill_on_invalid_dep,
            begin,
            // after the begin, when both are given
            deadline: after_begin.map(|after| begin.unwrap_or(1_000_000) + after),
            time_min,
            tmp_mb,
            prefer,
            // one node: within any job's node count
            nodelist: on_n1.then(|| "n1".to_string()),
            oversubscribe,
            gres_flags,
            acctg_freq,
            distribution,
            mem_bind,
            gpu_bind,
            gpu_freq,
            cpu_freq,
            profile,
            switches,
            container,
            container_id,
            // one way of sharing nodes
            exclusive: exclusive.filter(|_| !oversubscribe),
            wait_all_nodes,
            use_min_nodes,
            // with the nodes to spread over
            spread_job: spread_job && on_n1,
            delay_boot,
            mcs_label,
            contiguous,
            extra,
            priority,
        },
    );
    (shape, names, texts, slurm).prop_map(
        |(
            (nodes, extra_tasks, per_node, cpus, memory, gpu, other_gres, time),
            (
                account,
                partition,
                qos,
                clusters,
                array,
                licenses,
                min_cpus_per_node,
                (hint, threads_per_core, ntasks_per_core),
            ),
            (
                job_name,
                output,
                error,
                dir,
                export,
                mail_type,
                mail_user,
                comment,
                constraint,
                excl,
                hold,
            ),
            mut slurm,
        )| {
            // Sharing CPUs and whole nodes exclude each other.
            if excl {
                slurm.oversubscribe = false;
                slurm.exclusive = None;
            }
            // A dependency names jobs of one cluster, which the request must name alone.
            if clusters.len() != 1 {
                slurm.dependency = None;
            }
            // The shortest limit is no longer than the limit.
            if let (Some(min), Some(limit)) = (&mut slurm.time_min, time.0) {
                *min = (*min).min(limit);
            }
            let cpus_per_task_given = cpus != 1 || extra_tasks % 2 == 0;
            // Memory and CPUs per GPU with GPUs only, and CPUs per GPU not with -c ...
            let memory = memory.filter(|m| gpu.is_some() || !matches!(m, MemoryRequest::PerGpu(_)));
            // ... nor with --gpus over more than one node (not priceable: refused).
            let cpus_per_gpu = gpu
                .as_ref()
                .filter(|g| !(g.1 == GpuPer::PerJob && nodes > 1))
                .and_then(|g| g.3)
                .filter(|_| !cpus_per_task_given);
            JobRequest {
                account,
                partition,
                qos,
                clusters: clusters.into_iter().collect(),
                nodes,
                nodes_exact: true,
                // -c 1 given or not (a count other than 1 was given)
                cpus_per_task_given,
                cpus_per_gpu,
                ntasks: nodes + extra_tasks,
                // at least what the tasks need on these nodes
                ntasks_per_node: per_node.map(|p| p.max((nodes + extra_tasks).div_ceil(nodes))),
                cpus_per_task: cpus,
                memory,
                gpus: gpu.map(|(count, per, kind, _)| GpuRequest { count, per, kind }),
                licenses,
                min_cpus_per_node,
                hint,
                threads_per_core,
                ntasks_per_core,
                time_limit_min: time.0,
                time_unlimited: time.1,
                job_name,
                output,
                error,
                working_dir: dir,
                export,
                mail_type,
                mail_user,
                comment,
                constraint,
                exclusive: excl,
                hold,
                array,
                // slurmctld refuses GPU clocks for shared GPUs
                slurm: SlurmOptions {
                    gpu_freq: slurm.gpu_freq.filter(|_| other_gres.is_empty()),
                    ..slurm
                },
                other_gres,
                ..JobRequest::default()
            }
        },
    )
}

proptest! {
    #[test]
    fn sbatch_lines_parse_back_to_the_same_request(request in request()) {
        request.validate().unwrap();
        let script = format!("#!/bin/bash\n{}\nsrun ./app\n", request.to_sbatch_lines().join("\n"));
        let parsed = parse_sbatch(&[], Some(&script))
            .unwrap_or_else(|e| panic!("{e}\n{script}"));
        let expected = JobRequest { script: Some(script.clone()), ..request };
        prop_assert_eq!(parsed, expected, "{}", script);
    }

    #[test]
    fn json_round_trips(request in request()) {
        let json = serde_json::to_string(&request).unwrap();
        let back: JobRequest = serde_json::from_str(&json).unwrap();
        prop_assert_eq!(back, request);
    }

    #[test]
    fn time_limits_display_and_parse_back(minutes in 1u64..=bursar_gateway::request::MAX_TIME_LIMIT_MIN) {
        let limit = TimeLimit::Minutes(minutes);
        prop_assert_eq!(TimeLimit::parse(&limit.to_string()).unwrap(), limit);
    }
}

#[test]
fn memory_from_sbatch_variables_follows_sbatch() {
    let env = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let parse = |cli: &[&str], vars: &[(&str, &str)], script: &str| {
        let args: Vec<String> = cli.iter().map(|s| s.to_string()).collect();
        parse_sbatch_command_with_env(&args, &env(vars), Some(script)).map(|c| c.request.memory)
    };
    let mem_script = "#!/bin/sh\n#SBATCH --mem=8G\ntrue\n";
    let cpu_script = "#!/bin/sh\n#SBATCH --mem-per-cpu=1G\ntrue\n";
    let plain = "#!/bin/sh\ntrue\n";
    // A variable replaces the script's same option...
    assert_eq!(
        parse(&[], &[("SBATCH_MEM_PER_NODE", "--mem=4G")], mem_script).unwrap(),
        Some(MemoryRequest::PerNode(4096))
    );
    // ...and the script's option wins over the other one from a variable.
    assert_eq!(
        parse(
            &[],
            &[("SBATCH_MEM_PER_CPU", "--mem-per-cpu=2G")],
            mem_script
        )
        .unwrap(),
        Some(MemoryRequest::PerNode(8192))
    );
    assert_eq!(
        parse(&[], &[("SBATCH_MEM_PER_NODE", "--mem=4G")], cpu_script).unwrap(),
        Some(MemoryRequest::PerCpu(1024))
    );
    // Both from variables: refused, unless the command line gives memory.
    let both = [
        ("SBATCH_MEM_PER_NODE", "--mem=4G"),
        ("SBATCH_MEM_PER_CPU", "--mem-per-cpu=2G"),
    ];
    let e = parse(&[], &both, mem_script).unwrap_err();
    assert!(e.to_string().contains("exclude each other"), "{e}");
    assert_eq!(
        parse(&["--mem=1G"], &both, plain).unwrap(),
        Some(MemoryRequest::PerNode(1024))
    );
    assert_eq!(
        parse(&[], &[("SBATCH_MEM_PER_CPU", "--mem-per-cpu=2G")], plain).unwrap(),
        Some(MemoryRequest::PerCpu(2048))
    );
    // GPUs from two variables conflict, unless the command line gives its own.
    let gpus = [("SBATCH_GRES", "--gres=gpu:1"), ("SBATCH_GPUS", "--gpus=2")];
    let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert!(parse_sbatch_command_with_env(&args(&[]), &env(&gpus), Some(plain)).is_err());
    let given =
        parse_sbatch_command_with_env(&args(&["--gpus-per-node=3"]), &env(&gpus), Some(plain))
            .unwrap()
            .request
            .gpus
            .unwrap();
    assert_eq!((given.count, given.per), (3, GpuPer::PerNode));
}

/// Whole nodes, as slurmctld allocates them (seen in sacct on 22.05 and 24.11 with 8 CPUs,
/// 16000 MB and 2 GPUs a node, DefMemPerCPU 1000): every CPU and GPU of each node, asked for
/// or not; memory per CPU over all the CPUs, per node as asked; `--mem=0` is the node's
/// memory, exclusive or not. A partition that never shares a node does the same to every
/// job; one whose node size is unknown prices what was asked.
#[test]
fn whole_nodes_are_allocated_as_slurmctld_allocates_them() {
    use bursar_gateway::request::NodeSize;
    let node = NodeSize {
        cpus: 8,
        mem_mb: 16000,
        gpus: 2,
    };
    let defaults = PartitionDefaults {
        mem_per_cpu_mb: Some(1000),
        node: Some(node),
        ..PartitionDefaults::default()
    };
    let with = |words: &[&str], defaults: &PartitionDefaults| {
        parse_ok(words).alloc_with_defaults(defaults)
    };
    for (words, sacct) in [
        (&["--exclusive"][..], "cpu=8,gres/gpu=2,mem=8000M,node=1"),
        (
            &["--exclusive", "--mem=2000"],
            "cpu=8,gres/gpu=2,mem=2000M,node=1",
        ),
        (
            &["--exclusive", "--mem-per-cpu=500"],
            "cpu=8,gres/gpu=2,mem=4000M,node=1",
        ),
        (&["--mem=0"], "cpu=1,mem=16000M,node=1"),
        (
            &["--exclusive", "-N", "2"],
            "cpu=16,gres/gpu=4,mem=16000M,node=2",
        ),
        (
            &["--exclusive", "--gres=gpu:1"],
            "cpu=8,gres/gpu=2,mem=8000M,node=1",
        ),
    ] {
        assert_eq!(
            with(words, &defaults),
            Tres::parse(sacct).unwrap(),
            "{words:?}"
        );
    }
    let never_shared = PartitionDefaults {
        exclusive: true,
        ..defaults
    };
    assert_eq!(
        with(&["-n", "2"], &never_shared),
        Tres::parse("cpu=8,gres/gpu=2,mem=8000M,node=1").unwrap()
    );
    // No memory asked for and no DefMemPerCPU: slurmctld gives all of each node's memory.
    let no_default = PartitionDefaults {
        mem_per_cpu_mb: None,
        ..defaults
    };
    assert_eq!(
        with(&["-n", "2", "-N", "2"], &no_default),
        Tres::parse("cpu=2,mem=32000M,node=2").unwrap()
    );
    let unknown = PartitionDefaults {
        node: None,
        ..defaults
    };
    assert_eq!(
        with(&["--exclusive", "--mem=0"], &unknown),
        Tres::parse("cpu=1,node=1").unwrap()
    );
}
