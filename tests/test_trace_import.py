"""`shock trace import`: public production traces (small files written here in each format)
to shock traces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from shock_cli import run_shock

from shock.core.errors import InputError, ShockError
from shock.core.plugins import default_registry
from shock.core.throughputs import default_throughputs
from shock.core.trace import read_trace
from shock.engine.runner import RunOptions, run
from shock.resources.profiles import synergy_profiles
from shock.traces.importers import import_trace, records
from shock.traces.importers.shaping import GPU_TIME_CLASSES, ShapeOptions
from shock.traces.templates import gavel_templates

TABLE = default_throughputs()


# --- files in each format -------------------------------------------------------------------


def philly_job(
    jobid: str,
    submitted: str,
    attempts: list[tuple[str, str, list[int]]],
    *,
    status: str = "Pass",
    user: str = "alice",
    vc: str = "vc1",
) -> dict[str, object]:
    """One cluster_job_log entry; an attempt is (start, end, GPUs on each server)."""
    return {
        "status": status,
        "vc": vc,
        "jobid": jobid,
        "attempts": [
            {
                "start_time": start,
                "end_time": end,
                "detail": [
                    {"ip": f"m{k}", "gpus": [f"gpu{g}" for g in range(count)]}
                    for k, count in enumerate(servers)
                ],
            }
            for start, end, servers in attempts
        ],
        "submitted_time": submitted,
        "user": user,
    }


def philly_log(path: Path, jobs: list[dict[str, object]]) -> Path:
    path.write_text(json.dumps(jobs, indent=1))
    return path


def sample_philly(path: Path) -> Path:
    return philly_log(
        path,
        [
            # 2 + 2 GPUs on two servers, one hour.
            philly_job("app_1", "2017-10-03 10:00:00",
                       [("2017-10-03 10:00:10", "2017-10-03 11:00:10", [2, 2])]),
            # A failed start (no times), then 1 GPU for 30 min; then 1 GPU for 10 min.
            philly_job("app_2", "2017-10-03 10:05:00",
                       [("None", "None", []),
                        ("2017-10-03 10:06:00", "2017-10-03 10:36:00", [1]),
                        ("2017-10-03 10:40:00", "2017-10-03 10:50:00", [1])],
                       user="bob", vc="vc2"),
            philly_job("app_3", "2017-10-03 10:20:00",
                       [("2017-10-03 10:21:00", "2017-10-03 12:21:00", [1])],
                       status="Killed", user="bob", vc="vc2"),
            philly_job("app_4", "2017-10-03 09:50:00",
                       [("None", "None", [])], user="carol"),
        ],
    )


HELIOS_HEADER = (
    "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,"
    "duration,queue\n"
)


def helios_log(path: Path, rows: list[str]) -> Path:
    path.write_text(HELIOS_HEADER + "".join(row + "\n" for row in rows))
    return path


def pai_tables(tmp_path: Path, header: bool) -> list[Path]:
    jobs = tmp_path / "pai_job_table.csv"
    tasks = tmp_path / "pai_task_table.csv"
    job_rows = [
        # Submitted at 1000, its tasks launch at 1060: 60 s of waiting, not run time.
        "j1,i1,u1,Terminated,1000,4660",
        "j2,i2,u2,Terminated,1100,1700",
        "j3,i3,u1,Failed,1200,1300",
        "j4,i4,u3,Terminated,1300,",
        "j5,i5,u3,Terminated,1400,1500",
    ]
    task_rows = [
        # j1: a worker task 2 × 100% and a ps task with no GPU: 2 GPUs; tasks from 1060 to 4660.
        "j1,worker,2,Terminated,1060,4600,600,30,100,V100",
        "j1,ps,1,Terminated,1070,4660,400,20,,",
        # j2: 1 × 50%: half a GPU.
        "j2,tensorflow,1,Terminated,1100,1700,200,10,50,T4",
        "j3,worker,1,Failed,1200,1300,100,5,100,P100",
        # j4's task never ended.
        "j4,worker,1,Running,1300,,100,5,100,P100",
        # j5 asks no GPU.
        "j5,worker,1,Terminated,1400,1500,100,5,0,",
    ]
    if header:
        job_rows.insert(0, "job_name,inst_id,user,status,start_time,end_time")
        task_rows.insert(
            0,
            "job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,"
            "plan_gpu,gpu_type",
        )
    jobs.write_text("".join(r + "\n" for r in job_rows))
    tasks.write_text("".join(r + "\n" for r in task_rows))
    return [tasks, jobs]  # either order


OPENB_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time\n"
)


def openb_pods(path: Path, rows: list[str]) -> Path:
    path.write_text(OPENB_HEADER + "".join(row + "\n" for row in rows))
    return path


def sample_openb(path: Path) -> Path:
    return openb_pods(
        path,
        [
            "openb-pod-0000,12000,49152,2,1000,V100M32,LS,Succeeded,100,7300,200",
            "openb-pod-0001,4000,8192,1,500,,BE,Running,150,1950,150",
            "openb-pod-0002,8000,16384,0,0,,BE,Succeeded,160,900,170",
            "openb-pod-0003,8000,16384,1,1000,,LS,Pending,170,,",
            "openb-pod-0004,32000,131072,8,1000,A100,Burstable,Failed,300,36300,300",
        ],
    )


def imported(fmt: str, paths: list[Path], **options: object) -> list:
    statuses = options.pop("statuses", None)
    attempts = options.pop("attempts", "last")
    jobs, _summary = import_trace(
        fmt, paths, ShapeOptions(**options), TABLE,  # type: ignore[arg-type]
        statuses=statuses, attempts=attempts,  # type: ignore[arg-type]
    )
    return jobs


# --- what each importer takes from its trace --------------------------------------------------


def test_philly_gpus_and_run_times_come_from_the_attempts(tmp_path: Path) -> None:
    log = sample_philly(tmp_path / "cluster_job_log")
    jobs = imported("philly", [log], models="random-synergy", entity="vc")
    # Pass jobs with an attempt that ran, by submission; app_4 never ran, app_3 was killed.
    assert [(j.scale_factor, j.duration, j.arrival_time, j.entity) for j in jobs] == [
        (4, 3600.0, 0.0, "vc1"),  # 2 + 2 GPUs
        (1, 600.0, 300.0, "vc2"),  # the last attempt's 10 minutes
    ]
    summed = imported("philly", [log], models="random-synergy", attempts="sum")
    assert [j.duration for j in summed] == [3600.0, 2400.0]
    # Each attempt a job of its own, arriving when the one before ended (Synergy's default).
    each = imported("philly", [log], models="random-synergy", attempts="each")
    assert [(j.duration, j.arrival_time) for j in each] == [
        (3600.0, 0.0),  # app_1, submitted 10:00
        (1800.0, 300.0),  # app_2's first attempt that ran, at its submission (10:05)
        (600.0, 2160.0),  # its next, when that one ended (10:36)
    ]
    every = imported("philly", [log], models="random-synergy", statuses=("Pass", "Killed"))
    assert [j.duration for j in every] == [3600.0, 600.0, 7200.0]
    assert [j.arrival_time for j in every] == [0.0, 300.0, 1200.0]


def test_run_times_become_steps_through_the_throughput_table(tmp_path: Path) -> None:
    log = sample_philly(tmp_path / "cluster_job_log")
    for job in imported("philly", [log], models="random-gavel", seed=5):
        rate = TABLE.throughput(job.job_type, job.scale_factor, "v100")
        assert job.total_steps == int(job.duration * rate)
        template = next(t for t in gavel_templates() if t.job_type == job.job_type)
        assert job.command == template.command()
    for job in imported("philly", [log], models="random-synergy", seed=5):
        iter_time = synergy_profiles()[job.job_type].iter_time_s
        assert job.total_steps == int(job.duration / iter_time)
    on_k80 = imported("philly", [log], models="random-gavel", seed=5, worker_type="k80")
    for job in on_k80:
        assert job.total_steps == int(job.duration * TABLE.throughput(job.job_type,
                                                                     job.scale_factor, "k80"))


def test_gpu_time_classes_pick_their_models(tmp_path: Path) -> None:
    # One job per class: 1 GPU for 30 min, 4 GPUs for 1 h, 2 GPUs for 25 h, 8 GPUs for 20 h.
    log = philly_log(
        tmp_path / "log",
        [
            philly_job("a", "2017-10-01 00:00:00",
                       [("2017-10-01 00:00:00", "2017-10-01 00:30:00", [1])]),
            philly_job("b", "2017-10-01 00:01:00",
                       [("2017-10-01 00:01:00", "2017-10-01 01:01:00", [4])]),
            philly_job("c", "2017-10-01 00:02:00",
                       [("2017-10-01 00:02:00", "2017-10-02 01:02:00", [2])]),
            philly_job("d", "2017-10-01 00:03:00",
                       [("2017-10-01 00:03:00", "2017-10-01 20:03:00", [8])]),
        ],
    )
    families = {label: set(f) for label, _upper, f in GPU_TIME_CLASSES}
    for seed in range(5):
        jobs = imported("philly", [log], seed=seed)
        assert [j.model_family in families[c] for j, c in
                zip(jobs, ("small", "medium", "large", "xlarge"), strict=True)] == [True] * 4


def test_odd_and_large_gpu_counts(tmp_path: Path) -> None:
    log = philly_log(
        tmp_path / "log",
        [
            philly_job("six", "2017-10-01 00:00:00",
                       [("2017-10-01 00:00:00", "2017-10-01 01:00:00", [4, 2])]),
            philly_job("sixteen", "2017-10-01 00:01:00",
                       [("2017-10-01 00:01:00", "2017-10-01 01:00:00", [8, 8])]),
        ],
    )
    down = imported("philly", [log], models="random-synergy")
    assert [j.scale_factor for j in down] == [4, 16]
    one = imported("philly", [log], models="random-synergy", odd_gpus="one", max_gpus=8)
    assert [j.scale_factor for j in one] == [1]
    dropped = imported("philly", [log], models="random-synergy", odd_gpus="drop")
    assert [j.scale_factor for j in dropped] == [16]
    # Gavel's table has no 16-GPU rows: the job is dropped, and said so.
    jobs, summary = import_trace("philly", [log], ShapeOptions(), TABLE)
    assert [j.scale_factor for j in jobs] == [4]
    assert summary.dropped == {"no model of the table runs on 16 GPUs": 1}


def test_duration_range_and_poisson_arrivals(tmp_path: Path) -> None:
    log = sample_philly(tmp_path / "log")
    kept = imported("philly", [log], models="random-synergy", min_duration_s=601.0)
    assert [j.duration for j in kept] == [3600.0]
    kept = imported("philly", [log], models="random-synergy", max_duration_s=600.0)
    assert [j.duration for j in kept] == [600.0]
    redrawn = imported("philly", [log], models="random-synergy", jobs_per_hour=2.0, seed=1)
    assert redrawn[0].arrival_time == 0.0 and redrawn[1].arrival_time > 0.0
    assert redrawn != imported("philly", [log], models="random-synergy", jobs_per_hour=2.0,
                               seed=2)
    at_once = imported("philly", [log], models="random-synergy", jobs_per_hour=0.0)
    assert [j.arrival_time for j in at_once] == [0.0, 0.0]
    # The rate draws its own stream: the models do not change with it.
    assert [j.job_type for j in redrawn] == [
        j.job_type for j in imported("philly", [log], models="random-synergy", seed=1)
    ]


def test_sampling_uniform_window_and_busiest(tmp_path: Path) -> None:
    # Submissions at minutes 0, 10, 20, 21, 22, 60: the busiest three are 20, 21, 22.
    minutes = (0, 10, 20, 21, 22, 60)
    log = philly_log(
        tmp_path / "log",
        [
            philly_job(f"j{m}", f"2017-10-01 01:{m % 60:02d}:00" if m < 60 else
                       "2017-10-01 02:00:00",
                       [("2017-10-01 03:00:00", "2017-10-01 04:00:00", [1])])
            for m in minutes
        ],
    )
    busiest = imported("philly", [log], models="random-synergy", num_jobs=3, sample="busiest")
    assert [j.arrival_time for j in busiest] == [0.0, 60.0, 120.0]
    for seed in range(6):
        window = imported("philly", [log], models="random-synergy", num_jobs=3,
                          sample="window", seed=seed)
        windows = [
            [60.0 * (m - minutes[start]) for m in minutes[start : start + 3]]
            for start in range(len(minutes) - 2)
        ]
        assert [j.arrival_time for j in window] in windows
        uniform = imported("philly", [log], models="random-synergy", num_jobs=4, seed=seed)
        assert len(uniform) == 4
        assert [j.job_id for j in uniform] == [0, 1, 2, 3]
        assert sorted(j.arrival_time for j in uniform) == [j.arrival_time for j in uniform]
    picks = {
        tuple(j.arrival_time for j in imported("philly", [log], models="random-synergy",
                                                num_jobs=4, seed=seed))
        for seed in range(6)
    }
    assert len(picks) > 1  # the seed chooses the sample
    starts = {
        imported("philly", [log], models="random-synergy", num_jobs=3, sample="window",
                 seed=seed)[1].arrival_time
        for seed in range(6)
    }
    assert len(starts) > 1  # and the window


def test_helios_reads_by_header_and_carries_cpus(tmp_path: Path) -> None:
    log = helios_log(
        tmp_path / "cluster_log.csv",
        [
            "h1,u1,vcA,8,48,1,COMPLETED,2020-04-01 00:00:00,2020-04-01 00:00:05,"
            "2020-04-01 02:00:05,7200,5",
            "h2,u2,vcB,0,4,1,COMPLETED,2020-04-01 00:01:00,2020-04-01 00:01:00,"
            "2020-04-01 00:11:00,600,0",
            "h3,u2,vcB,1,6,1,FAILED,2020-04-01 00:02:00,2020-04-01 00:02:00,"
            "2020-04-01 00:05:00,180,0",
            "h4,u3,vcB,2,12,1,COMPLETED,2020-04-01 00:03:00,2020-04-01 00:04:00,"
            "2020-04-01 00:34:00,1800,60",
        ],
    )
    jobs, summary = import_trace(
        "helios", [log], ShapeOptions(models="random-synergy", entity="user"), TABLE
    )
    assert [(j.scale_factor, j.duration, j.arrival_time, j.cpus, j.entity) for j in jobs] == [
        (8, 7200.0, 0.0, 48.0, "u1"),
        (2, 1800.0, 180.0, 12.0, "u3"),
    ]
    assert summary.read == 4
    assert summary.dropped == {"no GPU": 1, "state FAILED": 1}
    failed_too = imported("helios", [log], models="random-synergy",
                          statuses=("COMPLETED", "FAILED"))
    assert len(failed_too) == 3


@pytest.mark.parametrize("header", [True, False])
def test_pai_gpu_requests_from_plan_gpu_and_instances(tmp_path: Path, header: bool) -> None:
    paths = pai_tables(tmp_path, header)
    jobs, summary = import_trace(
        "pai2020", paths, ShapeOptions(models="random-synergy", entity="user"), TABLE
    )
    # j1: 2 × 100% = 2 GPUs, 1 h; j2: 50% of a GPU, rounded up to one, 10 min.
    assert [(j.scale_factor, j.duration, j.arrival_time, j.entity) for j in jobs] == [
        (2, 3600.0, 0.0, "u1"),
        (1, 600.0, 100.0, "u2"),
    ]
    # CPUs: (2 × 600 + 400) % of a core; memory: 2 × 30 + 20 GB.
    assert (jobs[0].cpus, jobs[0].memory_gb) == (16.0, 80.0)
    assert summary.dropped == {
        "status Failed": 1, "no submission, launch or end time": 1, "no GPU": 1
    }
    whole = imported("pai2020", paths, models="random-synergy", fractional="drop")
    assert [j.scale_factor for j in whole] == [2]


def test_alibaba2023_pods(tmp_path: Path) -> None:
    pods = sample_openb(tmp_path / "openb_pod_list_default.csv")
    jobs, summary = import_trace(
        "alibaba2023", [pods], ShapeOptions(models="random-synergy"), TABLE
    )
    # Pod 0: 2 GPUs, scheduled at 200, deleted at 7300; pod 1 shares half a GPU.
    assert [(j.scale_factor, j.duration, j.arrival_time, j.cpus, j.memory_gb) for j in jobs] == [
        (2, 7100.0, 0.0, 12.0, 48.0),
        (1, 1800.0, 50.0, 4.0, 8.0),
        (8, 36000.0, 200.0, 32.0, 128.0),
    ]
    assert summary.dropped == {"never scheduled or never deleted": 1, "no GPU": 1}
    done = imported("alibaba2023", [pods], models="random-synergy", statuses=("Succeeded",))
    assert [j.scale_factor for j in done] == [2]
    with pytest.raises(InputError, match="records no user") as caught:
        imported("alibaba2023", [pods], entity="user")
    assert caught.value.field == "--entity"


# --- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "line", "field", "words"),
    [
        ('[{"jobid": "a", "status": "Pass"', 1, None, "bad JSON"),
        ('[\n{"jobid": "a"}\n]', 2, "status", "missing"),
        ('[\n{"jobid": "a", "status": "Pass", "submitted_time": "2017-10-01 00:00:00",\n'
         ' "attempts": [{"start_time": "soon", "end_time": "None", "detail": []}]}\n]',
         2, "attempts.start_time", "date-time"),
        ('[\n{"jobid": "a", "status": "Pass", "submitted_time": "2017-10-01 00:00:00",\n'
         ' "attempts": [{"start_time": "2017-10-01 00:00:00"}]}\n]', 2, "attempts.end_time",
         "missing"),
        ('{"jobid": "a"}', 1, None, "list of jobs"),
        ('[{"jobid": "a", "status": "Pass", "submitted_time": "2017-10-01 00:00:00", '
         '"attempts": []} {"jobid": "b"}]', 1, None, "between jobs"),
        ('[1, 2]', 1, None, "JSON object"),
    ],
)
def test_bad_philly_logs_name_file_line_and_field(
    tmp_path: Path, text: str, line: int, field: str | None, words: str
) -> None:
    path = tmp_path / "log"
    path.write_text(text)
    with pytest.raises(InputError) as caught:
        imported("philly", [path])
    assert (caught.value.path, caught.value.line, caught.value.field) == (str(path), line, field)
    assert words in str(caught.value)


@pytest.mark.parametrize(
    ("rows", "line", "field", "words"),
    [
        (["h1,u1,vcA,many,48,1,COMPLETED,0,0,10,10,0"], 2, "gpu_num", "number"),
        (["h1,u1,vcA,1,48,1,COMPLETED,0,0,10,ten,0"], 2, "duration", "number"),
        (["h1,u1,vcA,1,48,1,COMPLETED,0,0,10,10,0", "h2,u1,vcA,1"], 3, "cpu_num", "columns"),
        (["h1,u1,vcA,1,48,1,COMPLETED,yesterday,0,10,10,0"], 2, "submit_time", "date-time"),
    ],
)
def test_bad_helios_rows_name_file_line_and_field(
    tmp_path: Path, rows: list[str], line: int, field: str, words: str
) -> None:
    path = helios_log(tmp_path / "cluster_log.csv", rows)
    with pytest.raises(InputError) as caught:
        imported("helios", [path])
    assert (caught.value.path, caught.value.line, caught.value.field) == (str(path), line, field)
    assert words in caught.value.reason


def test_missing_columns_are_named(tmp_path: Path) -> None:
    path = tmp_path / "cluster_log.csv"
    path.write_text("job_id,user,vc,cpu_num,state,submit_time,duration\nh1,u,v,1,COMPLETED,0,1\n")
    with pytest.raises(InputError) as caught:
        imported("helios", [path])
    assert (caught.value.line, caught.value.field) == (1, "gpu_num")
    pods = tmp_path / "openb.csv"
    pods.write_text(OPENB_HEADER.replace("num_gpu,", "") + "p,1,1,1,V100,LS,Running,0,9,1\n")
    with pytest.raises(InputError, match="num_gpu"):
        imported("alibaba2023", [pods])


def test_bad_pai_rows(tmp_path: Path) -> None:
    tasks, jobs = pai_tables(tmp_path, header=False)
    tasks.write_text(tasks.read_text() + "j9,worker,two,Terminated,1,2,100,5,100,V100\n")
    with pytest.raises(InputError) as caught:
        imported("pai2020", [tasks, jobs])
    assert (caught.value.path, caught.value.line, caught.value.field) == (str(tasks), 7, "inst_num")
    with pytest.raises(InputError, match="two files"):
        imported("pai2020", [jobs])
    with pytest.raises(InputError, match="job table"):
        imported("pai2020", [jobs, jobs])


def test_options_are_checked() -> None:
    with pytest.raises(InputError, match="not a status") as caught:
        import_trace("philly", [Path("x")], ShapeOptions(), TABLE, statuses=("Done",))
    assert caught.value.field == "--status"
    with pytest.raises(ShockError, match=r"unknown trace importer 'slurm'.*alibaba2023"):
        import_trace("slurm", [Path("x")], ShapeOptions(), TABLE)


# --- streaming ------------------------------------------------------------------------------


def test_the_json_list_is_read_in_pieces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = sample_philly(tmp_path / "log")
    whole = json.loads(log.read_text())
    for chunk in (1, 3, 7, 64):
        monkeypatch.setattr(records, "_CHUNK_CHARS", chunk)
        items = list(records.json_list_items(log))
        assert [item for _line, item in items] == whole
        lines = log.read_text().splitlines()
        for line, item in items:
            assert lines[line - 1].strip().startswith("{")
            assert json.dumps(item["jobid"]) in "\n".join(lines[line - 1 : line + 3])


# --- the command ----------------------------------------------------------------------------


def test_the_command_is_deterministic_and_its_trace_runs(tmp_path: Path) -> None:
    log = sample_philly(tmp_path / "cluster_job_log")
    outputs = []
    for name in ("a.trace", "b.trace"):
        done = run_shock(
            "trace", "import", "philly", str(log), "-o", str(tmp_path / name),
            "--models", "random-gavel", "--seed", "3", "--rate", "4", "--status", "any",
            "--jobs", "2", cwd=tmp_path,
        )
        assert done.returncode == 0, done.stderr
        assert "wrote 2 jobs" in done.stdout
        outputs.append((tmp_path / name).read_bytes())
    assert outputs[0] == outputs[1]
    trace = read_trace(tmp_path / "a.trace", default_registry())
    assert trace.format == "gavel" and len(trace.jobs) == 2
    done = run_shock("run", "--trace", str(tmp_path / "a.trace"), "--policy", "max_min_fairness",
                     "--json", str(tmp_path / "out.json"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    document = json.loads((tmp_path / "out.json").read_text())
    assert document["metrics"]["jobs"] == 2


def test_entities_and_requests_travel_in_a_synergy_csv(tmp_path: Path) -> None:
    pods = tmp_path / "pods.csv"
    helios = helios_log(
        tmp_path / "cluster_log.csv",
        [f"h{i},u{i % 2},vc{i % 3},{1 << (i % 3)},{6 * (1 << (i % 3))},1,COMPLETED,{60 * i},"
         f"0,0,{1800 + 300 * i},0" for i in range(6)],
    )
    out = tmp_path / "helios.csv"
    done = run_shock("trace", "import", "helios", str(helios), "-o", str(out),
                     "--entity", "vc", "--models", "random-synergy", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    trace = read_trace(out, default_registry())
    assert [j.entity for j in trace.jobs] == [f"vc{i % 3}" for i in range(6)]
    assert [j.cpus for j in trace.jobs] == [6.0 * (1 << (i % 3)) for i in range(6)]
    result = run(RunOptions(policy="max_min_fairness_water_filling", trace=str(out)))
    assert result.unfinished_jobs == 0
    # A Gavel trace has no column for entities: said so.
    done = run_shock("trace", "import", "helios", str(helios), "-o", str(tmp_path / "x.trace"),
                     "--entity", "vc", cwd=tmp_path)
    assert done.returncode == 2
    assert "--entity" in done.stderr and "carries no entities" in done.stderr
    sample_openb(pods)
    done = run_shock("trace", "import", "alibaba2023", str(pods), "-o", str(tmp_path / "p.csv"),
                     "--models", "random-synergy", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    header = (tmp_path / "p.csv").read_text().splitlines()[0]
    assert header.endswith(",cpus,memory_gb")


def test_a_bad_file_is_reported_without_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_text('[{"jobid": "a",')
    done = run_shock("trace", "import", "philly", str(path), "-o", str(tmp_path / "x.trace"),
                     cwd=tmp_path)
    assert done.returncode == 2
    assert f"{path}:1" in done.stderr and "bad JSON" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ("p0,lots,49152,2,1000,V100M32,LS,Succeeded,100,7300,200", "cpu_milli"),
        ("p0,12000,49152,2,1000,V100M32,LS,Succeeded,100,later,200", "deletion_time"),
        ("p0,12000,49152,two,1000,V100M32,LS,Succeeded,100,7300,200", "num_gpu"),
    ],
)
def test_bad_alibaba2023_rows(tmp_path: Path, row: str, field: str) -> None:
    pods = openb_pods(tmp_path / "pods.csv", ["p1,1000,1024,1,1000,,LS,Running,0,10,1", row])
    with pytest.raises(InputError) as caught:
        imported("alibaba2023", [pods])
    assert (caught.value.path, caught.value.line, caught.value.field) == (str(pods), 3, field)


def test_nothing_left_says_what_was_dropped(tmp_path: Path) -> None:
    pods = sample_openb(tmp_path / "pods.csv")
    with pytest.raises(InputError) as caught:
        imported("alibaba2023", [pods], statuses=("Pending",))
    assert "read 5" in str(caught.value) and "phase Succeeded: 2" in str(caught.value)
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(InputError, match="file is empty"):
        imported("helios", [empty])
