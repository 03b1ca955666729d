"""Kubernetes' protobuf encoding (``application/vnd.kubernetes.protobuf``) for kubesim's kinds.

Layer: kubesim (imports nothing from batchd). Called by the server to decode request bodies
(``kubectl create namespace|job|cronjob`` and ``create job --from=cronjob/…`` send them, as do
client-go programs that ask for protobuf, such as a component renewing its Lease) and by the
tests to build them.

A body is the four magic bytes ``k8s\\0`` then a ``runtime.Unknown`` message whose ``raw`` field
holds the object's own message. The messages are described here, from the published field
numbers of ``k8s.io/api`` and ``k8s.io/apimachinery`` (facts of the wire format), as a compact
table compiled into descriptors for the ``protobuf`` runtime, which does the wire decoding.

Table syntax, one message per entry, fields separated by spaces: ``name=N[:type][flags]``.
``type`` is a scalar (``string`` is the default, ``int32``, ``int64``, ``bool``, ``bytes``), a
message of the table, ``map`` (string to string) or ``map<Message>``. Flags: ``*`` repeated,
``?`` a Go pointer or a field without ``omitempty`` (a zero value on the wire is kept, where
otherwise a zero scalar is a Go zero value and is left out of the JSON form, as the API
server's JSON encoder omits it), ``^`` a Go embedded struct (its fields sit inline in the JSON
object). What the table does not describe arrives as an unknown field, which the server
handles under ``fieldValidation`` as it handles unknown JSON fields.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError, Message

from kubesim.store import micro_timestamp, timestamp

__all__ = ["MAGIC", "MEDIA_TYPE", "ProtobufError", "decode", "encode", "message_for"]

MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"
_PACKAGE = "kubesim.wire"

_STATUS_CONTAINER = (
    "name=1 state=2:ContainerState lastState=3:ContainerState ready=4:bool? restartCount=5:int32? "
    "image=6 imageID=7 containerID=8 started=9:bool? allocatedResources=10:map<Quantity> "
    "resources=11:ResourceRequirements volumeMounts=12:VolumeMountStatus* user=13:ContainerUser "
    "allocatedResourcesStatus=14:ResourceStatus* stopSignal=15?"
)
_CONTAINER = (
    "name=1 image=2 command=3* args=4* workingDir=5 ports=6:ContainerPort* envFrom=19:EnvFromSource* "
    "env=7:EnvVar* resources=8:ResourceRequirements resizePolicy=23:ContainerResizePolicy* "
    "restartPolicy=24? volumeMounts=9:VolumeMount* volumeDevices=21:VolumeDevice* "
    "livenessProbe=10:Probe readinessProbe=11:Probe startupProbe=22:Probe lifecycle=12:Lifecycle "
    "terminationMessagePath=13 terminationMessagePolicy=20 imagePullPolicy=14 "
    "securityContext=15:SecurityContext stdin=16:bool stdinOnce=17:bool tty=18:bool"
)
_TABLE: dict[str, str] = {
    # k8s.io/apimachinery: runtime and meta/v1
    "TypeMeta": "apiVersion=1 kind=2",
    "Unknown": "typeMeta=1:TypeMeta raw=2:bytes contentEncoding=3 contentType=4",
    "Time": "seconds=1:int64 nanos=2:int32",
    "MicroTime": "seconds=1:int64 nanos=2:int32",
    "Quantity": "string=1",
    "IntOrString": "type=1:int64 intVal=2:int32 strVal=3",
    "FieldsV1": "Raw=1:bytes",
    "ObjectMeta": (
        "name=1 generateName=2 namespace=3 selfLink=4 uid=5 resourceVersion=6 generation=7:int64 "
        "creationTimestamp=8:Time deletionTimestamp=9:Time deletionGracePeriodSeconds=10:int64? "
        "labels=11:map annotations=12:map ownerReferences=13:OwnerReference* finalizers=14* "
        "managedFields=17:ManagedFieldsEntry*"
    ),
    "OwnerReference": "kind=1 name=3 uid=4 apiVersion=5 controller=6:bool? blockOwnerDeletion=7:bool?",
    "ManagedFieldsEntry": (
        "manager=1 operation=2 apiVersion=3 time=4:Time fieldsType=6 fieldsV1=7:FieldsV1 subresource=8"
    ),
    "LabelSelector": "matchLabels=1:map matchExpressions=2:LabelSelectorRequirement*",
    "LabelSelectorRequirement": "key=1 operator=2 values=3*",
    # k8s.io/api/batch/v1
    "Job": "metadata=1:ObjectMeta spec=2:JobSpec status=3:JobStatus",
    "JobSpec": (
        "parallelism=1:int32? completions=2:int32? activeDeadlineSeconds=3:int64? "
        "podFailurePolicy=11:PodFailurePolicy successPolicy=16:SuccessPolicy backoffLimit=7:int32? "
        "backoffLimitPerIndex=12:int32? maxFailedIndexes=13:int32? selector=4:LabelSelector "
        "manualSelector=5:bool? template=6:PodTemplateSpec ttlSecondsAfterFinished=8:int32? "
        "completionMode=9? suspend=10:bool? podReplacementPolicy=14? managedBy=15?"
    ),
    "JobStatus": (
        "conditions=1:JobCondition* startTime=2:Time completionTime=3:Time active=4:int32 "
        "succeeded=5:int32 failed=6:int32 terminating=11:int32? completedIndexes=7 failedIndexes=10? "
        "uncountedTerminatedPods=8:UncountedTerminatedPods ready=9:int32?"
    ),
    "JobCondition": (
        "type=1 status=2 lastProbeTime=3:Time lastTransitionTime=4:Time reason=5 message=6"
    ),
    "UncountedTerminatedPods": "succeeded=1* failed=2*",
    "PodFailurePolicy": "rules=1:PodFailurePolicyRule*",
    "PodFailurePolicyRule": (
        "action=1 onExitCodes=2:PodFailurePolicyOnExitCodesRequirement "
        "onPodConditions=3:PodFailurePolicyOnPodConditionsPattern*"
    ),
    "PodFailurePolicyOnExitCodesRequirement": "containerName=1? operator=2 values=3:int32*",
    "PodFailurePolicyOnPodConditionsPattern": "type=1 status=2",
    "SuccessPolicy": "rules=1:SuccessPolicyRule*",
    "SuccessPolicyRule": "succeededIndexes=1? succeededCount=2:int32?",
    "JobTemplateSpec": "metadata=1:ObjectMeta spec=2:JobSpec",
    "CronJob": "metadata=1:ObjectMeta spec=2:CronJobSpec status=3:CronJobStatus",
    "CronJobSpec": (
        "schedule=1 timeZone=8? startingDeadlineSeconds=2:int64? concurrencyPolicy=3 suspend=4:bool? "
        "jobTemplate=5:JobTemplateSpec successfulJobsHistoryLimit=6:int32? failedJobsHistoryLimit=7:int32?"
    ),
    "CronJobStatus": "active=1:ObjectReference* lastScheduleTime=4:Time lastSuccessfulTime=5:Time",
    # k8s.io/api/core/v1
    "Namespace": "metadata=1:ObjectMeta spec=2:NamespaceSpec status=3:NamespaceStatus",
    "NamespaceSpec": "finalizers=1*",
    "NamespaceStatus": "phase=1 conditions=2:NamespaceCondition*",
    "NamespaceCondition": "type=1 status=2 lastTransitionTime=4:Time reason=5 message=6",
    "ObjectReference": "kind=1 namespace=2 name=3 uid=4 apiVersion=5 resourceVersion=6 fieldPath=7",
    "LocalObjectReference": "name=1",
    "Pod": "metadata=1:ObjectMeta spec=2:PodSpec status=3:PodStatus",
    "PodTemplateSpec": "metadata=1:ObjectMeta spec=2:PodSpec",
    "PodSpec": (
        "volumes=1:Volume* initContainers=20:Container* containers=2:Container* "
        "ephemeralContainers=34:EphemeralContainer* restartPolicy=3 terminationGracePeriodSeconds=4:int64? "
        "activeDeadlineSeconds=5:int64? dnsPolicy=6 nodeSelector=7:map serviceAccountName=8 "
        "serviceAccount=9 automountServiceAccountToken=21:bool? nodeName=10 hostNetwork=11:bool "
        "hostPID=12:bool hostIPC=13:bool shareProcessNamespace=27:bool? securityContext=14:PodSecurityContext "
        "imagePullSecrets=15:LocalObjectReference* hostname=16 subdomain=17 affinity=18:Affinity "
        "schedulerName=19 tolerations=22:Toleration* hostAliases=23:HostAlias* priorityClassName=24 "
        "priority=25:int32? dnsConfig=26:PodDNSConfig readinessGates=28:PodReadinessGate* "
        "runtimeClassName=29? enableServiceLinks=30:bool? preemptionPolicy=31? overhead=32:map<Quantity> "
        "topologySpreadConstraints=33:TopologySpreadConstraint* setHostnameAsFQDN=35:bool? os=36:PodOS "
        "hostUsers=37:bool? schedulingGates=38:PodSchedulingGate* resourceClaims=39:PodResourceClaim* "
        "resources=40:ResourceRequirements"
    ),
    "Container": _CONTAINER,
    "EphemeralContainer": "ephemeralContainerCommon=1:EphemeralContainerCommon^ targetContainerName=2",
    "EphemeralContainerCommon": _CONTAINER,
    "ContainerPort": "name=1 hostPort=2:int32 containerPort=3:int32? protocol=4 hostIP=5",
    "EnvVar": "name=1 value=2 valueFrom=3:EnvVarSource",
    "EnvVarSource": (
        "fieldRef=1:ObjectFieldSelector resourceFieldRef=2:ResourceFieldSelector "
        "configMapKeyRef=3:ConfigMapKeySelector secretKeyRef=4:SecretKeySelector"
    ),
    "ObjectFieldSelector": "apiVersion=1 fieldPath=2",
    "ResourceFieldSelector": "containerName=1 resource=2 divisor=3:Quantity",
    "ConfigMapKeySelector": "localObjectReference=1:LocalObjectReference^ key=2 optional=3:bool?",
    "SecretKeySelector": "localObjectReference=1:LocalObjectReference^ key=2 optional=3:bool?",
    "EnvFromSource": "prefix=1 configMapRef=2:ConfigMapEnvSource secretRef=3:SecretEnvSource",
    "ConfigMapEnvSource": "localObjectReference=1:LocalObjectReference^ optional=2:bool?",
    "SecretEnvSource": "localObjectReference=1:LocalObjectReference^ optional=2:bool?",
    "ResourceRequirements": "limits=1:map<Quantity> requests=2:map<Quantity> claims=3:ResourceClaim*",
    "ResourceClaim": "name=1 request=2",
    "ContainerResizePolicy": "resourceName=1 restartPolicy=2",
    "VolumeMount": (
        "name=1 readOnly=2:bool mountPath=3 subPath=4 mountPropagation=5? subPathExpr=6 recursiveReadOnly=7?"
    ),
    "VolumeDevice": "name=1 devicePath=2",
    "Probe": (
        "handler=1:ProbeHandler^ initialDelaySeconds=2:int32 timeoutSeconds=3:int32 periodSeconds=4:int32 "
        "successThreshold=5:int32 failureThreshold=6:int32 terminationGracePeriodSeconds=7:int64?"
    ),
    "ProbeHandler": "exec=1:ExecAction httpGet=2:HTTPGetAction tcpSocket=3:TCPSocketAction grpc=4:GRPCAction",
    "ExecAction": "command=1*",
    "HTTPGetAction": "path=1 port=2:IntOrString host=3 scheme=4 httpHeaders=5:HTTPHeader*",
    "HTTPHeader": "name=1 value=2?",
    "TCPSocketAction": "port=1:IntOrString host=2",
    "GRPCAction": "port=1:int32? service=2?",
    "Lifecycle": "postStart=1:LifecycleHandler preStop=2:LifecycleHandler stopSignal=3?",
    "LifecycleHandler": (
        "exec=1:ExecAction httpGet=2:HTTPGetAction tcpSocket=3:TCPSocketAction sleep=4:SleepAction"
    ),
    "SleepAction": "seconds=1:int64?",
    "SecurityContext": (
        "capabilities=1:Capabilities privileged=2:bool? seLinuxOptions=3:SELinuxOptions "
        "windowsOptions=10:WindowsSecurityContextOptions runAsUser=4:int64? runAsGroup=8:int64? "
        "runAsNonRoot=5:bool? readOnlyRootFilesystem=6:bool? allowPrivilegeEscalation=7:bool? "
        "procMount=9? seccompProfile=11:SeccompProfile appArmorProfile=12:AppArmorProfile"
    ),
    "Capabilities": "add=1* drop=2*",
    "SELinuxOptions": "user=1 role=2 type=3 level=4",
    "WindowsSecurityContextOptions": (
        "gmsaCredentialSpecName=1? gmsaCredentialSpec=2? runAsUserName=3? hostProcess=4:bool?"
    ),
    "SeccompProfile": "type=1 localhostProfile=2?",
    "AppArmorProfile": "type=1 localhostProfile=2?",
    "PodSecurityContext": (
        "seLinuxOptions=1:SELinuxOptions windowsOptions=8:WindowsSecurityContextOptions runAsUser=2:int64? "
        "runAsGroup=6:int64? runAsNonRoot=3:bool? supplementalGroups=4:int64* supplementalGroupsPolicy=12? "
        "fsGroup=5:int64? sysctls=7:Sysctl* fsGroupChangePolicy=9? seccompProfile=10:SeccompProfile "
        "appArmorProfile=11:AppArmorProfile seLinuxChangePolicy=13?"
    ),
    "Sysctl": "name=1 value=2",
    "Toleration": "key=1 operator=2 value=3 effect=4 tolerationSeconds=5:int64?",
    "HostAlias": "ip=1 hostnames=2*",
    "PodDNSConfig": "nameservers=1* searches=2* options=3:PodDNSConfigOption*",
    "PodDNSConfigOption": "name=1 value=2?",
    "PodReadinessGate": "conditionType=1",
    "PodOS": "name=1",
    "PodSchedulingGate": "name=1",
    "PodResourceClaim": "name=1 resourceClaimName=3? resourceClaimTemplateName=4?",
    "TopologySpreadConstraint": (
        "maxSkew=1:int32? topologyKey=2 whenUnsatisfiable=3 labelSelector=4:LabelSelector "
        "minDomains=5:int32? nodeAffinityPolicy=6? nodeTaintsPolicy=7? matchLabelKeys=8*"
    ),
    "Affinity": "nodeAffinity=1:NodeAffinity podAffinity=2:PodAffinity podAntiAffinity=3:PodAntiAffinity",
    "NodeAffinity": (
        "requiredDuringSchedulingIgnoredDuringExecution=1:NodeSelector "
        "preferredDuringSchedulingIgnoredDuringExecution=2:PreferredSchedulingTerm*"
    ),
    "NodeSelector": "nodeSelectorTerms=1:NodeSelectorTerm*",
    "NodeSelectorTerm": "matchExpressions=1:NodeSelectorRequirement* matchFields=2:NodeSelectorRequirement*",
    "NodeSelectorRequirement": "key=1 operator=2 values=3*",
    "PreferredSchedulingTerm": "weight=1:int32? preference=2:NodeSelectorTerm",
    "PodAffinity": (
        "requiredDuringSchedulingIgnoredDuringExecution=1:PodAffinityTerm* "
        "preferredDuringSchedulingIgnoredDuringExecution=2:WeightedPodAffinityTerm*"
    ),
    "PodAntiAffinity": (
        "requiredDuringSchedulingIgnoredDuringExecution=1:PodAffinityTerm* "
        "preferredDuringSchedulingIgnoredDuringExecution=2:WeightedPodAffinityTerm*"
    ),
    "PodAffinityTerm": (
        "labelSelector=1:LabelSelector namespaces=2* topologyKey=3 namespaceSelector=4:LabelSelector "
        "matchLabelKeys=5* mismatchLabelKeys=6*"
    ),
    "WeightedPodAffinityTerm": "weight=1:int32? podAffinityTerm=2:PodAffinityTerm",
    "Volume": "name=1 volumeSource=2:VolumeSource^",
    "VolumeSource": (
        "hostPath=1:HostPathVolumeSource emptyDir=2:EmptyDirVolumeSource "
        "gcePersistentDisk=3:GCEPersistentDiskVolumeSource awsElasticBlockStore=4:AWSElasticBlockStoreVolumeSource "
        "secret=6:SecretVolumeSource iscsi=8:ISCSIVolumeSource fc=17:FCVolumeSource "
        "nfs=7:NFSVolumeSource persistentVolumeClaim=10:PersistentVolumeClaimVolumeSource "
        "downwardAPI=16:DownwardAPIVolumeSource configMap=19:ConfigMapVolumeSource "
        "projected=26:ProjectedVolumeSource csi=28:CSIVolumeSource image=30:ImageVolumeSource"
    ),
    "HostPathVolumeSource": "path=1 type=2?",
    "GCEPersistentDiskVolumeSource": "pdName=1 fsType=2 partition=3:int32 readOnly=4:bool",
    "AWSElasticBlockStoreVolumeSource": "volumeID=1 fsType=2 partition=3:int32 readOnly=4:bool",
    "ISCSIVolumeSource": (
        "targetPortal=1 iqn=2 lun=3:int32? iscsiInterface=4 fsType=5 readOnly=6:bool portals=7* "
        "chapAuthDiscovery=8:bool chapAuthSession=11:bool secretRef=10:LocalObjectReference initiatorName=12?"
    ),
    "FCVolumeSource": "targetWWNs=1* lun=2:int32? fsType=3 readOnly=4:bool wwids=5*",
    "EmptyDirVolumeSource": "medium=1 sizeLimit=2:Quantity",
    "SecretVolumeSource": "secretName=1 items=2:KeyToPath* defaultMode=3:int32? optional=4:bool?",
    "NFSVolumeSource": "server=1 path=2 readOnly=3:bool",
    "PersistentVolumeClaimVolumeSource": "claimName=1 readOnly=2:bool",
    "DownwardAPIVolumeSource": "items=1:DownwardAPIVolumeFile* defaultMode=2:int32?",
    "DownwardAPIVolumeFile": (
        "path=1 fieldRef=2:ObjectFieldSelector resourceFieldRef=3:ResourceFieldSelector mode=4:int32?"
    ),
    "ConfigMapVolumeSource": (
        "localObjectReference=1:LocalObjectReference^ items=2:KeyToPath* defaultMode=3:int32? optional=4:bool?"
    ),
    "KeyToPath": "key=1 path=2 mode=3:int32?",
    "ProjectedVolumeSource": "sources=1:VolumeProjection* defaultMode=2:int32?",
    "VolumeProjection": (
        "secret=1:SecretProjection downwardAPI=2:DownwardAPIProjection configMap=3:ConfigMapProjection "
        "serviceAccountToken=4:ServiceAccountTokenProjection"
    ),
    "SecretProjection": "localObjectReference=1:LocalObjectReference^ items=2:KeyToPath* optional=4:bool?",
    "ConfigMapProjection": "localObjectReference=1:LocalObjectReference^ items=2:KeyToPath* optional=4:bool?",
    "DownwardAPIProjection": "items=1:DownwardAPIVolumeFile*",
    "ServiceAccountTokenProjection": "audience=1 expirationSeconds=2:int64? path=3",
    "CSIVolumeSource": (
        "driver=1 readOnly=2:bool? fsType=3? volumeAttributes=4:map nodePublishSecretRef=5:LocalObjectReference"
    ),
    "ImageVolumeSource": "reference=1 pullPolicy=2",
    "PodStatus": (
        "observedGeneration=17:int64 phase=1 conditions=2:PodCondition* message=3 reason=4 "
        "nominatedNodeName=11 hostIP=5 hostIPs=16:HostIP* podIP=6 podIPs=12:PodIP* startTime=7:Time "
        "initContainerStatuses=10:ContainerStatus* containerStatuses=8:ContainerStatus* qosClass=9 "
        "ephemeralContainerStatuses=13:ContainerStatus* resize=14 resourceClaimStatuses=15:PodResourceClaimStatus*"
    ),
    "PodCondition": (
        "type=1 observedGeneration=7:int64 status=2 lastProbeTime=3:Time lastTransitionTime=4:Time reason=5 message=6"
    ),
    "PodIP": "ip=1",
    "HostIP": "ip=1",
    "PodResourceClaimStatus": "name=1 resourceClaimName=2?",
    "ContainerStatus": _STATUS_CONTAINER,
    "VolumeMountStatus": "name=1 mountPath=2 readOnly=3:bool recursiveReadOnly=4?",
    "ContainerUser": "linux=1:LinuxContainerUser",
    "LinuxContainerUser": "uid=1:int64? gid=2:int64? supplementalGroups=3:int64*",
    "ResourceStatus": "name=1 resources=2:ResourceHealth*",
    "ResourceHealth": "resourceID=1 health=2",
    "ContainerState": (
        "waiting=1:ContainerStateWaiting running=2:ContainerStateRunning terminated=3:ContainerStateTerminated"
    ),
    "ContainerStateWaiting": "reason=1 message=2",
    "ContainerStateRunning": "startedAt=1:Time",
    "ContainerStateTerminated": (
        "exitCode=1:int32? signal=2:int32 reason=3 message=4 startedAt=5:Time finishedAt=6:Time containerID=7"
    ),
    "Event": (
        "metadata=1:ObjectMeta involvedObject=2:ObjectReference reason=3 message=4 source=5:EventSource "
        "firstTimestamp=6:Time lastTimestamp=7:Time count=8:int32 type=9 eventTime=10:MicroTime "
        "series=11:EventSeries action=12 related=13:ObjectReference reportingComponent=14? reportingInstance=15?"
    ),
    "EventSource": "component=1 host=2",
    "EventSeries": "count=1:int32 lastObservedTime=2:MicroTime",
    # k8s.io/api/events/v1
    "EventsEvent": (
        "metadata=1:ObjectMeta eventTime=2:MicroTime? series=3:EventsEventSeries reportingController=4 "
        "reportingInstance=5 action=6 reason=7 regarding=8:ObjectReference related=9:ObjectReference "
        "note=10 type=11 deprecatedSource=12:EventSource deprecatedFirstTimestamp=13:Time "
        "deprecatedLastTimestamp=14:Time deprecatedCount=15:int32"
    ),
    "EventsEventSeries": "count=1:int32? lastObservedTime=2:MicroTime?",
    # k8s.io/api/coordination/v1: every spec field is a pointer
    "Lease": "metadata=1:ObjectMeta spec=2:LeaseSpec",
    "LeaseSpec": (
        "holderIdentity=1? leaseDurationSeconds=2:int32? acquireTime=3:MicroTime renewTime=4:MicroTime "
        "leaseTransitions=5:int32? strategy=6? preferredHolder=7?"
    ),
}

# (apiVersion, kind) → message name
_KINDS: dict[tuple[str, str], str] = {
    ("v1", "Namespace"): "Namespace",
    ("v1", "Pod"): "Pod",
    ("v1", "Event"): "Event",
    ("events.k8s.io/v1", "Event"): "EventsEvent",
    ("batch/v1", "Job"): "Job",
    ("batch/v1", "CronJob"): "CronJob",
    ("coordination.k8s.io/v1", "Lease"): "Lease",
}
_SCALARS = {
    "string": descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
    "int32": descriptor_pb2.FieldDescriptorProto.TYPE_INT32,
    "int64": descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
    "bool": descriptor_pb2.FieldDescriptorProto.TYPE_BOOL,
    "bytes": descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
}
_ZERO: dict[str, Any] = {"string": "", "int32": 0, "int64": 0, "bool": False, "bytes": b""}


class ProtobufError(ValueError):
    """A body that is not a Kubernetes protobuf envelope of a kind kubesim serves."""


@dataclass(frozen=True)
class _Field:
    name: str
    number: int
    type: str  # a scalar, "map", "map<Message>" or a message name
    repeated: bool
    keep_zero: bool
    inline: bool

    @property
    def map_value(self) -> str | None:
        if self.type == "map":
            return "string"
        if self.type.startswith("map<"):
            return self.type[4:-1]
        return None


def _parse_field(spec: str) -> _Field:
    flags = ""
    while spec[-1] in "*?^":
        flags += spec[-1]
        spec = spec[:-1]
    name, _, rest = spec.partition("=")
    number, _, ftype = rest.partition(":")
    return _Field(name, int(number), ftype or "string", "*" in flags, "?" in flags, "^" in flags)


@cache
def _fields(message: str) -> tuple[_Field, ...]:
    return tuple(_parse_field(spec) for spec in _TABLE[message].split())


@cache
def _pool() -> descriptor_pool.DescriptorPool:
    T = descriptor_pb2.FieldDescriptorProto
    f = descriptor_pb2.FileDescriptorProto(name="kubesim/wire.proto", package=_PACKAGE, syntax="proto2")
    for mname in _TABLE:
        m = f.message_type.add(name=mname)
        for fld in _fields(mname):
            d = m.field.add(name=fld.name, number=fld.number, json_name=fld.name)
            value = fld.map_value
            if value is not None:
                entry = m.nested_type.add(name=f"{fld.name[0].upper()}{fld.name[1:]}Entry")
                entry.options.map_entry = True
                entry.field.add(name="key", number=1, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL)
                v = entry.field.add(name="value", number=2, label=T.LABEL_OPTIONAL)
                if value in _SCALARS:
                    v.type = _SCALARS[value]
                else:
                    v.type, v.type_name = T.TYPE_MESSAGE, f".{_PACKAGE}.{value}"
                d.label, d.type = T.LABEL_REPEATED, T.TYPE_MESSAGE
                d.type_name = f".{_PACKAGE}.{mname}.{entry.name}"
                continue
            d.label = T.LABEL_REPEATED if fld.repeated else T.LABEL_OPTIONAL
            if fld.type in _SCALARS:
                d.type = _SCALARS[fld.type]
            else:
                d.type, d.type_name = T.TYPE_MESSAGE, f".{_PACKAGE}.{fld.type}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return pool


def message_for(name: str) -> type[Message]:
    """The generated message class of a table entry (``"Job"``, ``"ObjectMeta"``, …)."""
    return message_factory.GetMessageClass(_pool().FindMessageTypeByName(f"{_PACKAGE}.{name}"))


# -- decoding: wire → the object's JSON form ----------------------------------------------------


def _time(msg: Any, micro: bool) -> str | None:
    seconds, nanos = msg.seconds, msg.nanos
    if seconds == 0 and nanos == 0:
        return None  # Go's zero time, which the JSON form writes as null
    t = datetime.fromtimestamp(seconds, UTC).replace(microsecond=nanos // 1000)
    return micro_timestamp(t) if micro else timestamp(t)


def _special_to_json(mtype: str, msg: Any) -> Any:
    if mtype in ("Time", "MicroTime"):
        return _time(msg, mtype == "MicroTime")
    if mtype == "Quantity":
        return msg.string
    if mtype == "IntOrString":
        return msg.strVal if msg.type == 1 else msg.intVal
    if mtype == "FieldsV1":
        raw = msg.Raw
        return json.loads(raw) if raw else {}
    raise KeyError(mtype)


_SPECIAL = frozenset({"Time", "MicroTime", "Quantity", "IntOrString", "FieldsV1"})


def _value_to_json(ftype: str, value: Any, path: str, unknown: list[str]) -> Any:
    if ftype in _SPECIAL:
        return _special_to_json(ftype, value)
    if ftype in _SCALARS:
        return base64.b64encode(value).decode() if ftype == "bytes" else value
    return _to_json(ftype, value, path, unknown)


def _to_json(mtype: str, msg: Message, path: str, unknown: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if _has_unknown(msg):
        unknown.append(path or ".")
    for fld in _fields(mtype):
        sub = f"{path}.{fld.name}"
        value = getattr(msg, fld.name)
        mv = fld.map_value
        if mv is not None:
            if value:
                out[fld.name] = {k: _value_to_json(mv, value[k], sub, unknown) for k in sorted(value)}
            continue
        if fld.repeated:
            if value:
                out[fld.name] = [_value_to_json(fld.type, v, sub, unknown) for v in value]
            continue
        if not msg.HasField(fld.name):
            continue
        converted = _value_to_json(fld.type, value, sub, unknown)
        if fld.inline and isinstance(converted, dict):
            out.update(converted)
        elif converted is None:
            continue
        elif fld.type in _SCALARS and not fld.keep_zero and converted == _ZERO[fld.type]:
            continue  # a Go zero value: the JSON form omits it
        else:
            out[fld.name] = converted
    return out


def _has_unknown(msg: Message) -> bool:
    try:
        from google.protobuf.unknown_fields import UnknownFieldSet
    except ImportError:  # older runtimes expose them on the message
        return bool(msg.UnknownFields())
    return len(UnknownFieldSet(msg)) > 0


@dataclass(frozen=True)
class Decoded:
    """A decoded body: the object's JSON form and the paths of messages with unknown fields."""

    api_version: str
    kind: str
    obj: dict[str, Any]
    unknown: tuple[str, ...]


def decode(body: bytes) -> Decoded:
    """Decode a ``k8s\\0`` envelope into the JSON form of the object it carries.

    Raises:
        ProtobufError: not an envelope, an undecodable message, or a kind kubesim does not serve.
    """
    if not body.startswith(MAGIC):
        raise ProtobufError("provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]")
    try:
        envelope: Any = message_for("Unknown").FromString(body[len(MAGIC):])
    except DecodeError as e:
        raise ProtobufError(f"unable to decode the protobuf envelope: {e}") from e
    type_meta = envelope.typeMeta
    api_version, kind = type_meta.apiVersion, type_meta.kind
    name = _KINDS.get((api_version, kind))
    if name is None:
        raise ProtobufError(f"no kind \"{kind}\" is registered for version \"{api_version}\"")
    encoding = envelope.contentEncoding
    if encoding:
        raise ProtobufError(f"unsupported content encoding {encoding!r}")
    try:
        msg = message_for(name).FromString(envelope.raw)
    except DecodeError as e:
        raise ProtobufError(f"unable to decode {kind}: {e}") from e
    unknown: list[str] = []
    obj = _to_json(name, msg, "", unknown)
    return Decoded(api_version, kind, {"apiVersion": api_version, "kind": kind, **obj}, tuple(unknown))


# -- encoding: the JSON form → wire ------------------------------------------------------------


def _parse_time(text: str) -> tuple[int, int]:
    t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    whole = t.replace(microsecond=0)
    return int(whole.timestamp()), t.microsecond * 1000


def _fill_special(mtype: str, target: Any, value: Any) -> None:
    if mtype in ("Time", "MicroTime"):
        seconds, nanos = _parse_time(value)
        target.seconds, target.nanos = seconds, nanos
    elif mtype == "Quantity":
        target.string = str(value)
    elif mtype == "IntOrString":
        if isinstance(value, str):
            target.type, target.strVal = 1, value
        else:
            target.type, target.intVal = 0, int(value)
    elif mtype == "FieldsV1":
        target.Raw = json.dumps(value, separators=(",", ":")).encode()


def _scalar(ftype: str, value: Any) -> Any:
    return base64.b64decode(value) if ftype == "bytes" else value


def _fill(mtype: str, msg: Message, obj: dict[str, Any]) -> None:
    if mtype in _SPECIAL:
        _fill_special(mtype, msg, obj)
        return
    for fld in _fields(mtype):
        if fld.inline:
            _fill(fld.type, getattr(msg, fld.name), obj)
            # An empty embedded struct is still written by the Go marshaller.
            getattr(msg, fld.name).SetInParent()
            continue
        if fld.name not in obj or obj[fld.name] is None:
            continue
        value = obj[fld.name]
        target = getattr(msg, fld.name)
        mv = fld.map_value
        if mv is not None:
            for k, v in value.items():
                if mv in _SCALARS:
                    target[k] = _scalar(mv, v)
                else:
                    _fill(mv, target[k], v)
        elif fld.repeated:
            for v in value:
                if fld.type in _SCALARS:
                    target.append(_scalar(fld.type, v))
                else:
                    _fill(fld.type, target.add(), v)
        elif fld.type in _SCALARS:
            setattr(msg, fld.name, _scalar(fld.type, value))
        else:
            target.SetInParent()
            _fill(fld.type, target, value)


def encode(obj: dict[str, Any]) -> bytes:
    """The ``k8s\\0`` envelope of an object's JSON form, as a client sends it.

    Raises:
        ProtobufError: the object's kind is not one kubesim serves.
    """
    api_version, kind = obj.get("apiVersion", ""), obj.get("kind", "")
    name = _KINDS.get((api_version, kind))
    if name is None:
        raise ProtobufError(f"no kind \"{kind}\" is registered for version \"{api_version}\"")
    msg = message_for(name)()
    _fill(name, msg, obj)
    envelope: Any = message_for("Unknown")()
    envelope.typeMeta.apiVersion, envelope.typeMeta.kind = api_version, kind
    envelope.raw = msg.SerializeToString()
    wire: bytes = envelope.SerializeToString()
    return MAGIC + wire


# -- integer formats ---------------------------------------------------------------------------


def _message_name(model: str) -> str:
    """The table's message for a client model class name (``V1JobSpec`` → ``JobSpec``)."""
    for prefix, replacement in (("EventsV1", "Events"), ("CoreV1", ""), ("V1", "")):
        if model.startswith(prefix):
            return replacement + model[len(prefix):]
    return model


@cache
def int_format(model: str, json_name: str) -> str | None:
    """``int32`` or ``int64``: the wire type of an integer field of a client model, or None when
    the table does not describe it. The wire types are the Go field types, so this is also the
    range the API server's JSON decoder accepts."""
    name = _message_name(model)
    if name not in _TABLE:
        return None
    return _int_format_in(name, json_name)


def _int_format_in(message: str, json_name: str) -> str | None:
    for fld in _fields(message):
        if fld.inline:
            found = _int_format_in(fld.type, json_name)
            if found is not None:
                return found
        elif fld.name == json_name and fld.type in ("int32", "int64"):
            return fld.type
    return None
