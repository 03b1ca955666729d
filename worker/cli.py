"""The ``batchd`` command line.

Layer: worker. Parses flags (click), then hands over to worker/app.py, kubesim or worker/dev.py.
Exit codes: 0 success, 1 runtime failure, 2 usage error (click's), 3 object or workflow not found.
Entry points that opened a Temporal client end through ``os._exit`` after flushing output, which
sidesteps sdk-python#300 (an abort at interpreter exit).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NoReturn, TypeVar

import click

from workflows.identity import TASK_QUEUE

if TYPE_CHECKING:
    from temporalio.client import Client

    from kube.client import Kube
    from worker.temporal import TemporalSettings

#: A click command function, before or after click turned it into a ``click.Command``.
Command = TypeVar("Command", bound=Callable[..., Any])


def exit_flushed(code: int) -> NoReturn:
    """Flush stdout and stderr, then leave without the interpreter's teardown (sdk-python#300)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
def main() -> None:
    """batchd — Kubernetes batch controllers (TTL-after-finished, CronJob, Job) as durable Temporal workflows.

    \b
    Quick start:   batchd dev                      # Temporal dev server + UI, kubesim, worker, examples
    In a cluster:  batchd worker --temporal-address temporal:7233
    Inspect:       batchd ttl list                 # pending TTL expirations, soonest first
                   batchd ttl hold NS/NAME         # keep a finished Job for debugging (release, extend)
                   batchd describe job NS/NAME     # a Job's workflows, state and pending timers
    Operate:       batchd cronjob trigger NS/NAME  # also suspend, resume, backfill, describe, history

    Exit codes: 0 ok, 1 failure, 2 usage error, 3 no such object/workflow.
    """


def temporal_options(f: Command) -> Command:
    """Flags every command that talks to Temporal shares.

    The command takes them as ``**temporal`` keyword arguments and hands them, unread, to
    :func:`_run_ops` (or :func:`_temporal_settings`).
    """
    opts = [
        click.option("--temporal-address", envvar="TEMPORAL_ADDRESS", default="localhost:7233", show_default=True,
                     help="Temporal frontend host:port."),
        click.option("--temporal-namespace", envvar="TEMPORAL_NAMESPACE", default="default", show_default=True),
        click.option("--temporal-api-key", envvar="TEMPORAL_API_KEY", default=None, help="API key (implies TLS)."),
        click.option("--temporal-tls/--no-temporal-tls", envvar="TEMPORAL_TLS", default=False, help="Use TLS."),
        click.option("--temporal-tls-ca", envvar="TEMPORAL_TLS_CA", type=click.Path(path_type=Path, exists=True),
                     default=None, help="CA bundle of the server certificate."),
        click.option("--temporal-tls-cert", envvar="TEMPORAL_TLS_CERT", type=click.Path(path_type=Path, exists=True),
                     default=None, help="Client certificate (mTLS)."),
        click.option("--temporal-tls-key", envvar="TEMPORAL_TLS_KEY", type=click.Path(path_type=Path, exists=True),
                     default=None, help="Client private key (mTLS)."),
        click.option("--temporal-tls-server-name", envvar="TEMPORAL_TLS_SERVER_NAME", default=None,
                     help="Server name to verify, if not the address host."),
        click.option("--temporal-tls-dir", envvar="TEMPORAL_TLS_DIR", type=click.Path(path_type=Path), default=None,
                     help="Directory (a mounted Secret) whose ca.crt, tls.crt and tls.key are used when present."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def _temporal_settings(temporal: dict[str, Any]) -> TemporalSettings:
    from worker.temporal import TemporalSettings

    # A Secret mounted as a directory has only the keys it defines, so each file is optional
    # (the Deployment in deploy/base mounts batchd-temporal this way); explicit flags win.
    tls_dir: Path | None = temporal.pop("temporal_tls_dir")

    def from_dir(flag: str, filename: str) -> Path | None:
        given: Path | None = temporal.pop(flag)
        if given is None and tls_dir is not None and (tls_dir / filename).is_file():
            return tls_dir / filename
        return given

    return TemporalSettings(
        address=temporal.pop("temporal_address"), namespace=temporal.pop("temporal_namespace"),
        api_key=temporal.pop("temporal_api_key") or None, tls=temporal.pop("temporal_tls"),
        tls_ca=from_dir("temporal_tls_ca", "ca.crt"), tls_cert=from_dir("temporal_tls_cert", "tls.crt"),
        tls_key=from_dir("temporal_tls_key", "tls.key"), tls_server_name=temporal.pop("temporal_tls_server_name") or None,
    )


def _run_ops(temporal: dict[str, Any], command: Callable[[Client], Awaitable[str]], *,
             timeout: float | None = None) -> NoReturn:
    """Run one operator command against Temporal, print its output and exit with its code."""
    from worker import commands
    from worker.temporal import connect

    settings = _temporal_settings(temporal)
    try:
        code, out, err = asyncio.run(commands.main(lambda: connect(settings), command, timeout=timeout))
    except Exception as exc:  # a bug or an unexpected SDK error: still one line and the clean exit path
        code, out, err = commands.EXIT_FAILURE, "", f"{type(exc).__name__}: {exc}"
    if out:
        click.echo(out)
    if err:
        click.echo(f"batchd: {err}", err=True)
    exit_flushed(code)


def _ref(_ctx: click.Context, _param: click.Parameter, value: str) -> tuple[str, str]:
    from worker import commands

    try:
        return commands.parse_ref(value)
    except ValueError as err:
        raise click.BadParameter(str(err)) from None


def _rfc3339(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    from datetime import datetime

    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise click.BadParameter(f"expected an RFC 3339 time with an offset, e.g. 2026-01-01T00:00:00Z; got {value!r}")
    return value


def _k8s_namespace(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    from worker import commands

    if value is not None and not commands.is_namespace(value):
        raise click.BadParameter(f"not a Kubernetes namespace name: {value!r}")
    return value


def _duration(_ctx: click.Context, _param: click.Parameter, value: str) -> int:
    from worker import commands

    try:
        return commands.parse_duration(value)
    except ValueError as err:
        raise click.BadParameter(str(err)) from None


def _sink(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    from urllib.parse import urlsplit

    if value is not None and (urlsplit(value).scheme not in ("http", "https") or not urlsplit(value).hostname):
        raise click.BadParameter(f"not an http(s) URL: {value!r}")
    return value


output_option = click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table",
                             show_default=True, help="Human table, or JSON for scripts.")


@main.command()
@temporal_options
@click.option("--task-queue", default=TASK_QUEUE, show_default=True)
@click.option("--kubeconfig", envvar="KUBECONFIG", type=click.Path(path_type=Path), default=None,
              help="Kubeconfig file; inside a Pod the in-cluster config is used when unset.")
@click.option("--namespaces", default="", help="Comma-separated namespaces to watch (default: all).")
@click.option("--ttl-scope", type=click.Choice(["managed", "all"]), default="managed", show_default=True,
              help="managed: Jobs with spec.managedBy=batchd.io/job-controller; all: every Job (disable the "
                   "built-in ttl-after-finished controller first).")
@click.option("--job-scope", type=click.Choice(["managed", "all"]), default="managed", show_default=True,
              help="managed: batchd's Job controller runs Jobs with spec.managedBy=batchd.io/job-controller; "
                   "all: also every Job that names no other controller (only where kube-controller-manager "
                   "does not run Jobs, as in batchd dev).")
@click.option("--cronjob-selector", default="batchd.io/managed=true", show_default=True,
              help="Label selector of the CronJobs batchd schedules; '' takes every CronJob (disable the "
                   "built-in cronjob controller first).")
@click.option("--cronjob-lead", type=click.FloatRange(min=0), default=60.0, show_default=True,
              help="Seconds before each schedule time that a CronJob workflow (policy Allow) hands the Job's "
                   "creation to the worker, which creates it on the second however many CronJobs share the "
                   "time; 0: the workflow wakes at the time itself.")
@click.option("--cloudevents-sink", default=None, metavar="URL", callback=_sink,
              help="POST a CloudEvent (structured JSON) here for each Job that finishes, each CronJob run "
                   "missed or skipped, and each CronJob the breaker suspends; delivered at least once, "
                   "retried while the sink is down. Off by default.")
@click.option("--group-recheck", default="30s", show_default=True, callback=_duration, metavar="DURATION",
              help="While a CronJob waits for a slot in its concurrency group, how often the group re-reads "
                   "the Jobs holding the slots, so one that ended unseen (deleted while no worker ran) frees "
                   "its slot.")
@click.option("--resync-seconds", type=float, default=600.0, show_default=True, help="Period at which every cached object is routed again (from the cache, no list).")
@click.option("--health-port", type=int, default=8080, show_default=True, help="/healthz, /readyz and /metrics.")
@click.option("--max-concurrent-activities", type=int, default=64, show_default=True)
@click.option("--max-cached-workflows", type=int, default=1000, show_default=True,
              help="Sticky cache size (a cached TTL workflow costs about 85 KiB, a CronJob one about 150 KiB). "
                   "Keep it above the number of CronJobs that share a schedule time: a wake-up outside the cache "
                   "replays the run's history.")
@click.option("--sticky-wait", default="10s", show_default=True, callback=_duration, metavar="DURATION",
              help="How long a workflow task waits for this worker's cache before any worker replays it from "
                   "its history. Raise it (60s) where one schedule time's tasks take longer to drain (2,000 "
                   "CronJobs on one minute); a task sent to a worker that is then killed waits this long too.")
@click.option("--leader-elect/--no-leader-elect", default=True, show_default=True,
              help="Route changes from one replica only, the holder of a Lease; every replica still runs "
                   "workflows and activities. Off: each replica's bridge sends on its own (idempotent, N times "
                   "the signals).")
@click.option("--leader-elect-resource-namespace", envvar="POD_NAMESPACE", default="default", show_default=True,
              help="Namespace of the Lease (in a Pod: its own, from $POD_NAMESPACE).")
@click.option("--leader-elect-resource-name", default="batchd", show_default=True, help="Name of the Lease.")
@click.option("--leader-elect-lease-duration", default="15s", show_default=True, callback=_duration,
              metavar="DURATION", help="How long the others wait after the holder's last renewal.")
@click.option("--leader-elect-renew-deadline", default="10s", show_default=True, callback=_duration,
              metavar="DURATION", help="How long the holder tries to renew before it stops leading.")
@click.option("--leader-elect-retry-period", default="2s", show_default=True, callback=_duration,
              metavar="DURATION", help="How often to renew, or to try to take the Lease.")
@click.option("--log-format", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--log-level", default="INFO", show_default=True)
def worker(task_queue: str, kubeconfig: Path | None, namespaces: str, ttl_scope: Literal["managed", "all"],
           job_scope: Literal["managed", "all"], cronjob_selector: str, cronjob_lead: float, resync_seconds: float,
           health_port: int, max_concurrent_activities: int, max_cached_workflows: int, sticky_wait: int,
           leader_elect: bool,
           leader_elect_resource_namespace: str, leader_elect_resource_name: str, leader_elect_lease_duration: int,
           leader_elect_renew_deadline: int, leader_elect_retry_period: int, log_format: str, log_level: str,
           cloudevents_sink: str | None, group_recheck: int, **temporal: Any) -> None:
    """Run the Temporal worker and the Kubernetes bridge (one process; run 2+ replicas safely)."""
    from worker import app, telemetry
    from worker.bridge import BridgeSettings
    from worker.lease import LeaseSettings

    try:
        lease = LeaseSettings(namespace=leader_elect_resource_namespace, name=leader_elect_resource_name,
                              lease_duration=leader_elect_lease_duration, renew_deadline=leader_elect_renew_deadline,
                              retry_period=leader_elect_retry_period) if leader_elect else None
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="--leader-elect-*") from None

    telemetry.setup_logging(log_format, log_level)
    settings = app.WorkerSettings(
        temporal=_temporal_settings(temporal),
        bridge=BridgeSettings(namespaces=tuple(n.strip() for n in namespaces.split(",") if n.strip()),
                              ttl_scope=ttl_scope, job_scope=job_scope, cronjob_selector=cronjob_selector,
                              cronjob_lead=cronjob_lead, task_queue=task_queue, resync_seconds=resync_seconds,
                              cloudevents=cloudevents_sink is not None),
        cloudevents_sink=cloudevents_sink,
        group_recheck=group_recheck,
        kubeconfig=kubeconfig,
        health_port=health_port,
        max_concurrent_activities=max_concurrent_activities,
        max_cached_workflows=max_cached_workflows,
        sticky_wait=sticky_wait,
        lease=lease,
    )
    code = 0
    try:
        asyncio.run(app.run(settings))
    except Exception as err:  # report, then exit non-zero
        click.echo(f"batchd worker: {type(err).__name__}: {err}", err=True)
        code = 1
    exit_flushed(code)


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Listen address (loopback only).")
@click.option("--port", type=int, default=0, show_default=True, help="0 picks a free port.")
@click.option("--kubeconfig-out", type=click.Path(path_type=Path), default=None, help="Write a kubeconfig here.")
@click.option("--no-kubelet", is_flag=True, help="Do not run the fake kubelet (Pods stay Pending).")
def kubesim(host: str, port: int, kubeconfig_out: Path | None, no_kubelet: bool) -> None:
    """Run kubesim, the Kubernetes API emulator, with its fake kubelet."""
    import kubesim as sim

    sim.run_forever(host, port, str(kubeconfig_out) if kubeconfig_out else None, kubelet=not no_kubelet)


def _controllers(_ctx: click.Context, _param: click.Parameter, value: str) -> tuple[str, ...]:
    from worker.cluster import UPSTREAM_CONTROLLERS

    names = tuple(sorted({v.strip() for v in value.split(",") if v.strip()}))
    unknown = [n for n in names if n not in UPSTREAM_CONTROLLERS]
    if unknown:
        raise click.BadParameter(f"{', '.join(unknown)}: choose from {', '.join(UPSTREAM_CONTROLLERS)}")
    return names


@main.command()
@click.option("--state-dir", type=click.Path(path_type=Path), required=True,
              help="Where the kubeconfigs, certificates, etcd's data and the logs go; a rerun resumes.")
@click.option("--upstream-controllers", default="", callback=_controllers, metavar="LIST",
              help="kube-controller-manager controllers to run that batchd replaces: a comma-separated subset "
                   "of job, cronjob, ttl-after-finished (default: none).")
def cluster(state_dir: Path, upstream_controllers: tuple[str, ...]) -> None:
    """Run upstream's control plane on loopback (make upstream builds it): etcd, kube-apiserver,
    kube-controller-manager, kube-scheduler and kwok's fake Nodes. Writes DIR/kubeconfig (admin) and
    DIR/batchd.kubeconfig (batchd's ServiceAccount); prints `running` when ready."""
    from worker import cluster as plane
    from worker.upstream import UpstreamError

    try:
        exit_flushed(plane.run(state_dir, upstream_controllers))
    except (UpstreamError, plane.ClusterError) as err:
        click.echo(f"batchd cluster: {err}", err=True)
        exit_flushed(1)


@main.command()
@click.option("--state-dir", type=click.Path(path_type=Path), default=Path(".batchd"), show_default=True,
              help="Where the dev server's database, the kubeconfig and logs live; a rerun resumes.")
@click.option("--temporal-port", type=int, default=7233, show_default=True)
@click.option("--ui-port", type=int, default=8233, show_default=True)
@click.option("--kube-port", type=int, default=0, show_default=True, help="kubesim port (0: free).")
@click.option("--health-port", type=int, default=0, show_default=True,
              help="The worker's /metrics, /healthz and /readyz (0: a free port; the banner names it).")
@click.option("--examples/--no-examples", default=True, show_default=True, help="Apply deploy/examples/.")
@click.option("--kube", type=click.Choice(["kubesim", "cluster"]), default="kubesim", show_default=True,
              help="kubesim: the embedded API emulator; cluster: upstream's control plane (`batchd cluster`, "
                   "built by `make upstream`) in <state-dir>/cluster.")
def dev(state_dir: Path, temporal_port: int, ui_port: int, kube_port: int, health_port: int, examples: bool,
        kube: str) -> None:
    """Run everything locally: Temporal dev server + UI, kubesim (or upstream's control plane), the
    worker, and the examples."""
    from worker import dev as devenv

    try:
        exit_flushed(asyncio.run(devenv.run(state_dir=state_dir, temporal_port=temporal_port, ui_port=ui_port,
                                     kube_port=kube_port, examples=examples, health_port=health_port, kube=kube)))
    except RuntimeError as err:  # UpstreamError, ClusterError: what is missing, said once
        click.echo(f"batchd dev: {err}", err=True)
        exit_flushed(1)


# -- operator commands (logic in worker/commands.py) --------------------------------------------


@main.group()
def ttl() -> None:
    """TTL-after-finished: what expires when; hold, release and extend an object's TTL."""


@ttl.command("list")
@temporal_options
@output_option
@click.option("--namespace", "-n", "k8s_namespace", default=None, callback=_k8s_namespace,
              help="Only this Kubernetes namespace.")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Show only the N soonest.")
def ttl_list(output: str, k8s_namespace: str | None, limit: int | None, **temporal: Any) -> None:
    """Pending TTL expirations, soonest first (from Temporal visibility).

    \b
    Columns: KIND NAMESPACE NAME UID EXPIRES (UTC) IN WORKFLOW-ID.
    Example: batchd ttl list -n team-a --limit 20
    """
    from worker import commands

    _run_ops(temporal, lambda c: commands.ttl_list(c, namespace=k8s_namespace, limit=limit, output=output))


def _run_kube(kubeconfig: Path | None, command: Callable[[Kube], str]) -> NoReturn:
    """Run one command against Kubernetes, print its output and exit with its code."""
    from kube.client import Kube
    from kube.config import load_access
    from worker import commands

    try:
        kube = Kube(load_access(kubeconfig))
    except Exception as exc:  # no kubeconfig, a broken one: one line, exit 1
        code, out, err = commands.EXIT_FAILURE, "", f"cannot configure the Kubernetes client: {exc}"
    else:
        code, out, err = commands.kube_main(lambda: command(kube))
    if out:
        click.echo(out)
    if err:
        click.echo(f"batchd: {err}", err=True)
    exit_flushed(code)


def kube_options(f: Command) -> Command:
    """Flags of the commands that write a Job or Pod in Kubernetes."""
    f = click.option("--kind", type=click.Choice(["Job", "Pod"]), default="Job", show_default=True,
                     help="What NS/NAME names.")(f)
    return click.option("--kubeconfig", envvar="KUBECONFIG", type=click.Path(path_type=Path), default=None,
                        help="Kubeconfig file; inside a Pod the in-cluster config is used when unset.")(f)


@ttl.command("hold")
@kube_options
@click.option("--reason", default="held with batchd ttl hold", show_default=True,
              help="Why; the annotation's value, shown by ttl list and in the UI.")
@click.argument("ref", metavar="NS/NAME", callback=_ref)
def ttl_hold(kind: str, kubeconfig: Path | None, reason: str, ref: tuple[str, str]) -> None:
    """Keep a Job (or TTL-labelled Pod) past its TTL: sets the batchd.io/ttl-hold annotation.

    \b
    Example: batchd ttl hold team-a/etl-42 --reason "debugging INC-1234"
    Exit code 3 if the object does not exist.
    """
    from worker import commands

    _run_kube(kubeconfig, lambda kube: commands.ttl_hold(kube, kind, *ref, reason))


@ttl.command("release")
@kube_options
@click.argument("ref", metavar="NS/NAME", callback=_ref)
def ttl_release(kind: str, kubeconfig: Path | None, ref: tuple[str, str]) -> None:
    """Remove the hold; an object already past its TTL is deleted at once.

    \b
    Example: batchd ttl release team-a/etl-42
    """
    from worker import commands

    _run_kube(kubeconfig, lambda kube: commands.ttl_release(kube, kind, *ref))


@ttl.command("extend")
@kube_options
@click.option("--by", "seconds", required=True, callback=_duration, metavar="DURATION",
              help="How much longer to keep it: 90s, 2h, 1h30m.")
@click.argument("ref", metavar="NS/NAME", callback=_ref)
def ttl_extend(kind: str, kubeconfig: Path | None, seconds: int, ref: tuple[str, str]) -> None:
    """Raise the TTL: spec.ttlSecondsAfterFinished and the per-outcome annotations (Job), the label (Pod).

    \b
    Example: batchd ttl extend team-a/etl-42 --by 2h
    """
    from worker import commands

    _run_kube(kubeconfig, lambda kube: commands.ttl_extend(kube, kind, *ref, seconds))


@main.group()
def describe() -> None:
    """Show an object's workflows: status, state, pending timers and activities."""


@describe.command("job")
@temporal_options
@output_option
@click.argument("ref", metavar="NS/NAME", callback=_ref)
def describe_job(output: str, ref: tuple[str, str], **temporal: Any) -> None:
    """A Job's workflows (TTL, Job controller) with their pending timers.

    \b
    Example: batchd describe job team-a/etl-42
    Exit code 3 if the Job has no workflow.
    """
    from worker import commands

    _run_ops(temporal, lambda c: commands.describe_object(c, "Job", *ref, output=output))


@describe.command("cronjob")
@temporal_options
@output_option
@click.argument("ref", metavar="NS/NAME", callback=_ref)
def describe_cronjob(output: str, ref: tuple[str, str], **temporal: Any) -> None:
    """A CronJob's workflow with its pending timers (the next schedule time).

    \b
    Example: batchd describe cronjob team-a/nightly
    Exit code 3 if the CronJob has no workflow.
    """
    from worker import commands

    _run_ops(temporal, lambda c: commands.describe_object(c, "CronJob", *ref, output=output))


@main.group()
def cronjob() -> None:
    """Operate a CronJob: through its workflow's Temporal Updates, or (--via kubernetes) as writes RBAC guards."""


#: the update's input field for each update option (the CLI's own parameter names)
_UPDATE_FIELDS = {"reason": "reason", "start": "from", "to": "to", "one_at_a_time": "oneAtATime"}


def _cronjob_update_command(update: str, help_text: str, *options: Callable[[click.Command], click.Command],
                            timeout: float = 30.0) -> None:
    @cronjob.command(update, help=help_text)
    @temporal_options
    @output_option
    @click.option("--timeout", type=float, default=timeout, show_default=True,
                  help="Seconds to wait for a worker to run it.")
    @click.option("--via", type=click.Choice(["temporal", "kubernetes"]), default="temporal", show_default=True,
                  help="temporal: the workflow's Update (needs write access to batchd's Temporal namespace). "
                       "kubernetes: a write to the CronJob or its Jobs with --kubeconfig, which the namespace's "
                       "RBAC guards (see docs/operations.md, 'Who may do what').")
    @click.option("--kubeconfig", envvar="KUBECONFIG", type=click.Path(path_type=Path), default=None,
                  help="With --via kubernetes: the kubeconfig file; inside a Pod the in-cluster config when unset.")
    @click.argument("ref", metavar="NS/NAME", callback=_ref)
    def command(output: str, timeout: float, via: str, kubeconfig: Path | None, ref: tuple[str, str],
                **options: Any) -> None:
        from worker import commands

        arg = {field: options.pop(k) for k, field in _UPDATE_FIELDS.items() if k in options}
        if via == "kubernetes":
            _run_kube(kubeconfig, lambda kube: commands.cronjob_kube(kube, *ref, update, output=output, arg=arg,
                                                                     timeout=timeout))
        _run_ops(options, lambda c: commands.cronjob_update(c, *ref, update, output=output, arg=arg), timeout=timeout)

    for option in options:
        option(command)


_cronjob_update_command("trigger", "Run the CronJob now (a manual Job, as `kubectl create job --from`); prints the Job name.")
_cronjob_update_command(
    "suspend", "Suspend the schedule; prints whether it changed. --reason is kept in the annotation "
    "batchd.io/suspend-reason, beside batchd.io/suspended-at.",
    click.option("--reason", default=None, help="Why it is suspended (shown by describe and kubectl)."))
_cronjob_update_command("resume", "Resume the schedule (and clear the suspend reason); prints whether it changed.")
_cronjob_update_command(
    "backfill", "Create the Job of every schedule time from --from to --to (both included), named as the schedule "
    "names it, so a time that has its Job gets no second one; prints what was created and what existed. Over "
    "1,000 times is refused (exit code 2).",
    click.option("--from", "start", required=True, callback=_rfc3339, help="First time (RFC 3339)."),
    click.option("--to", required=True, callback=_rfc3339, help="Last time (RFC 3339), not in the future."),
    click.option("--one-at-a-time", is_flag=True, default=False,
                 help="Create each Job after the previous one finished (durable: a worker restart goes on)."),
    timeout=300.0)


def _cronjob_query_command(query: str, help_text: str) -> None:
    @cronjob.command(query, help=help_text)
    @temporal_options
    @output_option
    @click.option("--timeout", type=float, default=30.0, show_default=True, help="Seconds to wait for the query.")
    @click.argument("ref", metavar="NS/NAME", callback=_ref)
    def command(output: str, timeout: float, ref: tuple[str, str], **temporal: Any) -> None:
        from worker import commands

        render = commands.cronjob_describe if query == "describe" else commands.cronjob_history
        _run_ops(temporal, lambda c: render(c, *ref, output=output), timeout=timeout)


_cronjob_query_command(
    "describe", "The CronJob workflow's own view (query `describe`): schedule, last and next runs, active Jobs.")
_cronjob_query_command(
    "history", "The run ledger (query `history`): the last 100 schedule times, triggers and backfills, what "
    "happened at each (created, skipped-concurrency, replaced, missed-deadline, suspended, too-many-missed, "
    "create-failed) and how the Job ended.")


if __name__ == "__main__":
    main()
