"""Load finished runs into the dev dstack server, for bursar's collector tests.

dstack has no API to create a *finished* run, and no backend can run anything on the
dev machine, so this writes the rows straight into the server's database -- through
dstack's own code, so that they are encoded exactly as the server encodes them:

  * ``validate_run_spec_and_set_defaults``  -- the same defaults as ``/runs/apply``
  * ``get_jobs_from_run_spec``              -- one job per node (multi-node runs)
  * ``create_job_model_for_new_submission`` -- one row per (re)submission
  * the ORM models ``RunModel`` / ``JobModel``

and then sets the finished state: statuses, termination reasons, timestamps,
``job_provisioning_data`` (instance type, price), ``job_runtime_data`` (shared-instance
blocks) and exit status. The server's background pipelines never pick up runs or jobs
in a finished status, so the rows stay as written (also across restarts).

Tied to dstack 0.22.5 (server internals); dstack.sh pins that version.

Usage (with the venv's python and the server's environment; dstack.sh does this):

    HOME=... DSTACK_SERVER_DIR=... venv/bin/python dstack_seed_runs.py \
        [--project hpc] [--base 2026-01-05T08:00:00Z] [--list]

Idempotent: run and submission ids are derived from the project and run names (the
same scheme as the reference recipe, so the ids match it); runs that exist are skipped.
The users named below must exist and be members of the project (dstack.sh makes them).
Prints one JSON line: {"created": [...], "skipped": [...]}.
"""

from dstack._internal.server import bootstrap

bootstrap.set_up_process()  # must run before any other dstack.server import

import argparse  # noqa: E402
import asyncio  # noqa: E402
import json  # noqa: E402
import uuid  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from datetime import datetime, timedelta, timezone  # noqa: E402
from typing import Dict, List, Optional, Tuple  # noqa: E402

import gpuhunt  # noqa: E402
from sqlalchemy import select  # noqa: E402

from dstack._internal.core.models.backends.base import BackendType  # noqa: E402
from dstack._internal.core.models.common import NetworkMode  # noqa: E402
from dstack._internal.core.models.configurations import TaskConfiguration  # noqa: E402
from dstack._internal.core.models.instances import (  # noqa: E402
    Disk,
    Gpu,
    InstanceAvailability,
    InstanceOfferWithAvailability,
    InstanceType,
    Resources,
)
from dstack._internal.core.models.repos.base import RepoType  # noqa: E402
from dstack._internal.core.models.runs import (  # noqa: E402
    JobProvisioningData,
    JobRuntimeData,
    JobStatus,
    JobTerminationReason,
    RunSpec,
    RunStatus,
    RunTerminationReason,
)
from dstack._internal.server import settings  # noqa: E402
from dstack._internal.server.db import Database  # noqa: E402
from dstack._internal.server.models import ProjectModel, RepoModel, RunModel, UserModel  # noqa: E402
from dstack._internal.server.services.jobs import get_jobs_from_run_spec  # noqa: E402
from dstack._internal.server.services.runs import create_job_model_for_new_submission  # noqa: E402
from dstack._internal.server.services.runs.spec import validate_run_spec_and_set_defaults  # noqa: E402

# Namespace of the deterministic ids. Do not change it: tests may key on the ids.
ID_NAMESPACE = uuid.UUID("5b1c4a52-7d0e-4d55-9c1e-6f3b2a9e0d11")


def stable_uuid4(name: str) -> uuid.UUID:
    """A deterministic id that is still a valid UUID *version 4*.

    ``Run.id`` and ``JobSubmission.id`` are pydantic ``UUID4``: with a plain uuid5,
    ``/runs/get`` answers 500 and ``/runs/list`` silently leaves the run out.
    """
    return uuid.UUID(bytes=uuid.uuid5(ID_NAMESPACE, name).bytes, version=4)


def instance(name: str, cpus: int, mem_gib: float, gpu: Optional[Tuple[str, int, int]] = None,
             spot: bool = False, disk_gib: int = 100) -> InstanceType:
    """An instance type; ``gpu`` is (name, count, memory GiB each)."""
    gpus = []
    if gpu:
        gpu_name, count, gpu_mem_gib = gpu
        gpus = [Gpu(name=gpu_name, memory_mib=gpu_mem_gib * 1024,
                    vendor=gpuhunt.AcceleratorVendor.NVIDIA)] * count
    return InstanceType(
        name=name,
        resources=Resources(cpus=cpus, memory_mib=int(mem_gib * 1024), gpus=gpus, spot=spot,
                            disk=Disk(size_mib=disk_gib * 1024)),
    )


@dataclass
class Attempt:
    """One job submission. Times are minutes after --base."""

    backend: BackendType
    region: str
    instance: InstanceType
    price: float  # USD/hour for the whole instance (what dstack's cost uses)
    submitted: int
    running: int
    finished: int
    status: JobStatus
    reason: JobTerminationReason
    exit_status: Optional[int] = None
    zone: Optional[str] = None
    blocks: Tuple[int, int] = (1, 1)  # (blocks used, total blocks) of a shared instance


@dataclass
class SeedRun:
    name: str
    user: str
    configuration: dict  # a dstack task configuration, without "type"
    status: RunStatus
    reason: RunTerminationReason
    submitted: int
    jobs: Dict[int, List[Attempt]] = field(default_factory=dict)  # job_num -> attempts
    deleted: bool = False


def done(**kw) -> dict:
    return dict(status=JobStatus.DONE, reason=JobTerminationReason.DONE_BY_RUNNER, exit_status=0, **kw)


A100 = instance("gpu_1x_a100_sxm4", 30, 200, gpu=("A100", 1, 40))
G5_12XL = instance("g5.12xlarge", 48, 192, gpu=("A10G", 4, 24))
G4DN_SPOT = instance("g4dn.xlarge", 4, 16, gpu=("T4", 1, 16), spot=True)

# Expected dstack costs (price x hours from submission to finish, summed over attempts)
# are in the comments; deploy/dev/README.md lists them too.
SEEDS: List[SeedRun] = [
    # plain single-job GPU run: 1.29 $/h x 123 min = 2.6445
    SeedRun("seed-train-a100", "alice",
            dict(commands=["python train.py"], resources={"cpu": 30, "gpu": "A100:1"}),
            RunStatus.DONE, RunTerminationReason.ALL_JOBS_DONE, submitted=0,
            jobs={0: [Attempt(BackendType.LAMBDA, "us-east-1", A100, 1.29, 0, 3, 123, **done())]}),
    # multi-node: 2 jobs (nodes=2), 2 x 5.672 $/h x 36 min = 6.8064
    SeedRun("seed-multinode", "admin",
            dict(commands=["torchrun train.py"], nodes=2, resources={"gpu": "A10G:4"}),
            RunStatus.DONE, RunTerminationReason.ALL_JOBS_DONE, submitted=60,
            jobs={n: [Attempt(BackendType.AWS, "us-east-2", G5_12XL, 5.672, 60, 66, 96,
                              zone="us-east-2a", **done())] for n in (0, 1)}),
    # spot retry: interrupted after 24 min, resubmitted, done after 44 min; 0.1578x24 + 0.1621x44 min = 0.182
    SeedRun("seed-spot-retry", "alice",
            dict(commands=["python finetune.py"], resources={"gpu": "T4:1"}, spot_policy="spot",
                 retry={"on_events": ["interruption"], "duration": "2h"}),
            RunStatus.DONE, RunTerminationReason.ALL_JOBS_DONE, submitted=180,
            jobs={0: [
                Attempt(BackendType.AWS, "eu-west-1", G4DN_SPOT, 0.1578, 180, 184, 204, JobStatus.FAILED,
                        JobTerminationReason.INTERRUPTED_BY_NO_CAPACITY, zone="eu-west-1b"),
                Attempt(BackendType.AWS, "eu-west-1", G4DN_SPOT, 0.1621, 205, 209, 249,
                        zone="eu-west-1c", **done()),
            ]}),
    # failed: exit 1 after 7 min; 0.134 $/h -> 0.0156
    SeedRun("seed-failed-cpu", "carol",
            dict(commands=["make test"], resources={"cpu": 4, "memory": "16GB"}),
            RunStatus.FAILED, RunTerminationReason.JOB_FAILED, submitted=300,
            jobs={0: [Attempt(BackendType.GCP, "us-central1", instance("e2-standard-4", 4, 16), 0.134,
                              300, 302, 307, JobStatus.FAILED, JobTerminationReason.CONTAINER_EXITED_WITH_ERROR,
                              exit_status=1, zone="us-central1-a")]}),
    # stopped by the user after 12 min; 0.69 $/h -> 0.138
    SeedRun("seed-stopped", "carol",
            dict(commands=["python serve.py"], resources={"gpu": "RTX4090:1"}),
            RunStatus.TERMINATED, RunTerminationReason.STOPPED_BY_USER, submitted=360,
            jobs={0: [Attempt(BackendType.RUNPOD, "EU-RO-1",
                              instance("NVIDIA GeForce RTX 4090", 16, 62, gpu=("RTX4090", 1, 24)), 0.69,
                              360, 362, 372, JobStatus.TERMINATED, JobTerminationReason.TERMINATED_BY_USER)]}),
    # on-prem SSH fleet (backend "remote", price 0 -> cost 0), 2 of the host's 4 blocks
    SeedRun("seed-onprem-ssh", "alice",
            dict(commands=["python eval.py"], resources={"cpu": 8, "gpu": "L40S:2"}),
            RunStatus.DONE, RunTerminationReason.ALL_JOBS_DONE, submitted=420,
            jobs={0: [Attempt(BackendType.REMOTE, "onprem-lab", instance("ssh", 32, 256, gpu=("L40S", 4, 48)),
                              0.0, 420, 421, 481, blocks=(2, 4), **done())]}),
    # deleted runs still come back from /api/runs/list, with "deleted": true; 0.096 x 12 min = 0.0192
    SeedRun("seed-deleted", "admin",
            dict(commands=["echo bye"], resources={"cpu": 2}),
            RunStatus.DONE, RunTerminationReason.ALL_JOBS_DONE, submitted=500, deleted=True,
            jobs={0: [Attempt(BackendType.AWS, "us-east-1", instance("m5.large", 2, 8), 0.096,
                              500, 502, 512, zone="us-east-1a", **done())]}),
]


def provisioning_data(a: Attempt, job_name: str) -> JobProvisioningData:
    return JobProvisioningData(
        backend=a.backend,
        instance_type=a.instance,
        instance_id="i-" + uuid.uuid5(ID_NAMESPACE, f"{job_name}{a.submitted}").hex[:17],
        hostname="203.0.113.10",  # TEST-NET-3: documentation addresses only
        internal_ip="10.0.0.10",
        region=a.region,
        availability_zone=a.zone,
        price=a.price,
        username="ubuntu",
        ssh_port=22,
        dockerized=True,
    )


def runtime_data(a: Attempt) -> JobRuntimeData:
    """The offer the job ran on; on a shared instance, the job's share of it."""
    used, total = a.blocks
    whole = a.instance.resources
    share = Resources(
        cpus=whole.cpus // total * used,
        memory_mib=whole.memory_mib // total * used,
        gpus=whole.gpus[: len(whole.gpus) // total * used],
        spot=whole.spot,
        disk=whole.disk,
    )
    offer = InstanceOfferWithAvailability(
        backend=a.backend,
        instance=InstanceType(name=a.instance.name, resources=share),
        region=a.region,
        price=a.price,  # dstack keeps the whole instance's price on shared offers
        availability=InstanceAvailability.BUSY if total > 1 else InstanceAvailability.AVAILABLE,
        blocks=used,
        total_blocks=total,
    )
    if total == 1:
        return JobRuntimeData(network_mode=NetworkMode.HOST, ports={}, offer=offer)
    return JobRuntimeData(network_mode=NetworkMode.BRIDGE, cpu=float(share.cpus), gpu=len(share.gpus),
                          memory=share.memory_mib / 1024, ports={}, offer=offer)


async def virtual_repo(session, project: ProjectModel) -> RepoModel:
    """Runs need a repo row; the server creates this virtual one on the first apply."""
    repo = (await session.execute(
        select(RepoModel).where(RepoModel.project_id == project.id, RepoModel.name == "none")
    )).scalar_one_or_none()
    if repo is None:
        repo = RepoModel(project_id=project.id, name="none", type=RepoType.VIRTUAL,
                         info=json.dumps({"repo_type": "virtual"}))
        session.add(repo)
        await session.commit()
    return repo


async def seed(project_name: str, base: datetime) -> dict:
    at = lambda minutes: base + timedelta(minutes=minutes)  # noqa: E731
    db = Database(settings.get_database_url())
    created, skipped = [], []
    try:
        async with db.get_session() as session:
            project = (await session.execute(
                select(ProjectModel).where(ProjectModel.name == project_name,
                                           ProjectModel.deleted == False)  # noqa: E712
            )).scalar_one()
            repo = await virtual_repo(session, project)
            for s in SEEDS:
                run_id = stable_uuid4(f"{project_name}/{s.name}")
                if await session.get(RunModel, run_id) is not None:
                    skipped.append(s.name)
                    continue
                user = (await session.execute(select(UserModel).where(UserModel.name == s.user))).scalar_one()
                run_spec = RunSpec(run_name=s.name,
                                   configuration=TaskConfiguration.model_validate({"type": "task", **s.configuration}))
                validate_run_spec_and_set_defaults(user, run_spec)
                last_finish = max(a.finished for attempts in s.jobs.values() for a in attempts)
                run = RunModel(
                    id=run_id, project_id=project.id, repo_id=repo.id, user_id=user.id, run_name=s.name,
                    submitted_at=at(s.submitted), last_processed_at=at(last_finish) + timedelta(seconds=7),
                    status=s.status, termination_reason=s.reason, run_spec=run_spec.model_dump_json(),
                    priority=run_spec.configuration.priority, deployment_num=0, desired_replica_count=1,
                    deleted=s.deleted,
                )
                session.add(run)
                for job in await get_jobs_from_run_spec(run_spec=run_spec, secrets={}, replica_num=0):
                    for num, a in enumerate(s.jobs[job.job_spec.job_num]):
                        jm = create_job_model_for_new_submission(run_model=run, job=job, status=a.status,
                                                                 submission_num=num)
                        jm.id = stable_uuid4(f"{run_id}/{job.job_spec.job_num}/{num}")
                        jm.submitted_at = at(a.submitted)
                        jm.running_at = at(a.running)
                        jm.last_processed_at = at(a.finished)  # the API's finished_at
                        jm.termination_reason = a.reason
                        jm.exit_status = a.exit_status
                        jm.job_provisioning_data = provisioning_data(a, jm.job_name).model_dump_json()
                        jm.job_runtime_data = runtime_data(a).model_dump_json()
                        jm.instance_assigned = True
                        jm.used_instance_id = stable_uuid4(f"instance/{jm.id}")
                        jm.waiting_master_job = None
                        session.add(jm)
                await session.commit()
                created.append(s.name)
    finally:
        await db.engine.dispose()
    return {"created": created, "skipped": skipped}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--project", default="hpc")
    ap.add_argument("--base", default="2026-01-05T08:00:00Z", help="time of the first submission (UTC)")
    ap.add_argument("--list", action="store_true", help="print the seeds and their ids, write nothing")
    args = ap.parse_args()
    base = datetime.fromisoformat(args.base.replace("Z", "+00:00")).astimezone(timezone.utc)
    if args.list:
        for s in SEEDS:
            print(f"{s.name:16} {s.user:6} {s.status.value:10} {stable_uuid4(f'{args.project}/{s.name}')}")
        return
    print(json.dumps(asyncio.run(seed(args.project, base))))


if __name__ == "__main__":
    main()
