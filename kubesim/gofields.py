"""How Go's JSON encoder writes the fields of kubesim's kinds: which are left out when zero or
empty, and which are written even when unset.

Layer: kubesim (imports nothing from batchd). Read by :mod:`kubesim.schema`, whose pruner shapes
every stored object as kube-apiserver would serialise it. The official Python client's models,
which kubesim reads its types from, do not say whether a Go field is a pointer or carries
``omitempty``; these tables do. They were read off the struct tags of ``k8s.io/api`` and
``k8s.io/apimachinery`` v0.34 (the types kube-apiserver 1.34 serves) and are keyed by the client's
model names. Fields not named here follow the common case: pointers and ``omitempty`` lists and
maps, left out when null or empty.
"""

from __future__ import annotations

from functools import cache

#: non-pointer scalars tagged ``omitempty``: left out at their zero value (0, "", false)
OMIT_ZERO: dict[str, str] = {
    "CoreV1Event": "reason message count type action",
    "CoreV1EventSeries": "count",
    "CoreV1ResourceClaim": "request",
    "EventsV1Event": "reportingController reportingInstance action reason note type deprecatedCount",
    "V1AWSElasticBlockStoreVolumeSource": "fsType partition readOnly",
    "V1AzureFileVolumeSource": "readOnly",
    "V1CephFSVolumeSource": "path user secretFile readOnly",
    "V1CinderVolumeSource": "fsType readOnly",
    "V1Container": (
        "image workingDir terminationMessagePath terminationMessagePolicy imagePullPolicy stdin stdinOnce tty"
    ),
    "V1ContainerPort": "name hostPort protocol hostIP",
    "V1ContainerRestartRule": "action",
    "V1ContainerRestartRuleOnExitCodes": "operator",
    "V1ContainerStateTerminated": "signal reason message containerID",
    "V1ContainerStateWaiting": "reason message",
    "V1ContainerStatus": "containerID",
    "V1CronJobSpec": "concurrencyPolicy",
    "V1EmptyDirVolumeSource": "medium",
    "V1EnvFromSource": "prefix",
    "V1EnvVar": "value",
    "V1EphemeralContainer": "targetContainerName",
    "V1EventSource": "component host",
    "V1FCVolumeSource": "fsType readOnly",
    "V1FlexVolumeSource": "fsType readOnly",
    "V1FlockerVolumeSource": "datasetName datasetUUID",
    "V1GCEPersistentDiskVolumeSource": "fsType partition readOnly",
    "V1GitRepoVolumeSource": "revision directory",
    "V1GlusterfsVolumeSource": "readOnly",
    "V1HTTPGetAction": "path host scheme",
    "V1ISCSIVolumeSource": "iscsiInterface fsType readOnly chapAuthDiscovery chapAuthSession",
    "V1ImageVolumeSource": "reference pullPolicy",
    "V1JobCondition": "reason message",
    "V1JobStatus": "active succeeded failed completedIndexes",
    "V1LocalObjectReference": "name",
    "V1ManagedFieldsEntry": "manager operation apiVersion fieldsType subresource",
    "V1NFSVolumeSource": "readOnly",
    "V1NamespaceCondition": "reason message",
    "V1NamespaceStatus": "phase",
    "V1ObjectFieldSelector": "apiVersion",
    "V1ObjectMeta": "name generateName namespace selfLink uid resourceVersion generation",
    "V1ObjectReference": "kind namespace name uid apiVersion resourceVersion fieldPath",
    "V1PersistentVolumeClaimSpec": "volumeName",
    "V1PersistentVolumeClaimVolumeSource": "readOnly",
    "V1PhotonPersistentDiskVolumeSource": "fsType",
    "V1PodCertificateProjection": "signerName keyType credentialBundlePath keyPath certificateChainPath",
    "V1PodCondition": "observedGeneration reason message",
    "V1PodDNSConfigOption": "name",
    "V1PodSpec": (
        "restartPolicy dnsPolicy serviceAccountName serviceAccount nodeName hostNetwork hostPID hostIPC "
        "hostname subdomain schedulerName priorityClassName"
    ),
    "V1PodStatus": "observedGeneration phase message reason nominatedNodeName hostIP podIP qosClass resize",
    "V1PortworxVolumeSource": "fsType readOnly",
    "V1Probe": "initialDelaySeconds timeoutSeconds periodSeconds successThreshold failureThreshold",
    "V1QuobyteVolumeSource": "readOnly user group tenant",
    "V1RBDVolumeSource": "fsType pool user keyring readOnly",
    "V1ResourceFieldSelector": "containerName",
    "V1ResourceHealth": "health",
    "V1SELinuxOptions": "user role type level",
    "V1ScaleIOVolumeSource": "sslEnabled protectionDomain storagePool storageMode volumeName fsType readOnly",
    "V1SecretVolumeSource": "secretName",
    "V1ServiceAccountTokenProjection": "audience",
    "V1StorageOSVolumeSource": "volumeName volumeNamespace fsType readOnly",
    "V1TCPSocketAction": "host",
    "V1Toleration": "key operator value effect",
    "V1VolumeMount": "readOnly subPath subPathExpr",
    "V1VolumeMountStatus": "readOnly",
    "V1VsphereVirtualDiskVolumeSource": "fsType storagePolicyName storagePolicyID",
}

#: non-pointer scalars without ``omitempty``: written at their zero value when unset (``name`` is "", ``name=0``, ``name=false``)
ZERO_KEPT: dict[str, str] = {
    "CoreV1Event": "reportingComponent reportingInstance",
    "CoreV1ResourceClaim": "name",
    "EventsV1EventSeries": "count=0",
    "V1AWSElasticBlockStoreVolumeSource": "volumeID",
    "V1AppArmorProfile": "type",
    "V1AzureDiskVolumeSource": "diskName diskURI",
    "V1AzureFileVolumeSource": "secretName shareName",
    "V1CSIVolumeSource": "driver",
    "V1CinderVolumeSource": "volumeID",
    "V1ClusterTrustBundleProjection": "path",
    "V1ConfigMapKeySelector": "key",
    "V1Container": "name",
    "V1ContainerExtendedResourceRequest": "containerName resourceName requestName",
    "V1ContainerPort": "containerPort=0",
    "V1ContainerResizePolicy": "resourceName restartPolicy",
    "V1ContainerStateTerminated": "exitCode=0",
    "V1ContainerStatus": "name ready=false restartCount=0 image imageID",
    "V1CronJobSpec": "schedule",
    "V1DownwardAPIVolumeFile": "path",
    "V1EnvVar": "name",
    "V1FileKeySelector": "volumeName path key",
    "V1FlexVolumeSource": "driver",
    "V1GCEPersistentDiskVolumeSource": "pdName",
    "V1GRPCAction": "port=0",
    "V1GitRepoVolumeSource": "repository",
    "V1GlusterfsVolumeSource": "endpoints path",
    "V1HTTPHeader": "name value",
    "V1HostAlias": "ip",
    "V1HostIP": "ip",
    "V1HostPathVolumeSource": "path",
    "V1ISCSIVolumeSource": "targetPortal iqn lun=0",
    "V1JobCondition": "type status",
    "V1KeyToPath": "key path",
    "V1LabelSelectorRequirement": "key operator",
    "V1LinuxContainerUser": "uid=0 gid=0",
    "V1NFSVolumeSource": "server path",
    "V1NamespaceCondition": "type status",
    "V1NodeSelectorRequirement": "key operator",
    "V1ObjectFieldSelector": "fieldPath",
    "V1OwnerReference": "apiVersion kind name uid",
    "V1PersistentVolumeClaimVolumeSource": "claimName",
    "V1PhotonPersistentDiskVolumeSource": "pdID",
    "V1PodAffinityTerm": "topologyKey",
    "V1PodCondition": "type status",
    "V1PodExtendedResourceClaimStatus": "resourceClaimName",
    "V1PodFailurePolicyOnExitCodesRequirement": "operator",
    "V1PodFailurePolicyOnPodConditionsPattern": "type status",
    "V1PodFailurePolicyRule": "action",
    "V1PodIP": "ip",
    "V1PodOS": "name",
    "V1PodReadinessGate": "conditionType",
    "V1PodResourceClaim": "name",
    "V1PodResourceClaimStatus": "name",
    "V1PodSchedulingGate": "name",
    "V1PortworxVolumeSource": "volumeID",
    "V1PreferredSchedulingTerm": "weight=0",
    "V1QuobyteVolumeSource": "registry volume",
    "V1RBDVolumeSource": "image",
    "V1ResourceFieldSelector": "resource",
    "V1ResourceHealth": "resourceID",
    "V1ResourceStatus": "name",
    "V1ScaleIOVolumeSource": "gateway system",
    "V1SeccompProfile": "type",
    "V1SecretKeySelector": "key",
    "V1ServiceAccountTokenProjection": "path",
    "V1SleepAction": "seconds=0",
    "V1Sysctl": "name value",
    "V1TopologySpreadConstraint": "maxSkew=0 topologyKey whenUnsatisfiable",
    "V1TypedLocalObjectReference": "kind name",
    "V1TypedObjectReference": "kind name",
    "V1Volume": "name",
    "V1VolumeDevice": "name devicePath",
    "V1VolumeMount": "name mountPath",
    "V1VolumeMountStatus": "name mountPath",
    "V1VsphereVirtualDiskVolumeSource": "volumePath",
    "V1WeightedPodAffinityTerm": "weight=0",
}

#: non-pointer structs: always written, as ``{}`` (or their own always-written fields) when unset
STRUCTS: dict[str, str] = {
    "CoreV1Event": "metadata involvedObject source",
    "EventsV1Event": "metadata regarding deprecatedSource",
    "V1Container": "resources",
    "V1ContainerStatus": "state lastState",
    "V1CronJob": "metadata spec status",
    "V1CronJobSpec": "jobTemplate",
    "V1Job": "metadata spec status",
    "V1JobSpec": "template",
    "V1JobTemplateSpec": "metadata spec",
    "V1Lease": "metadata spec",
    "V1Namespace": "metadata spec status",
    "V1PersistentVolumeClaimSpec": "resources",
    "V1PersistentVolumeClaimTemplate": "metadata spec",
    "V1Pod": "metadata spec status",
    "V1PodTemplateSpec": "metadata spec",
    "V1PreferredSchedulingTerm": "preference",
    "V1WeightedPodAffinityTerm": "podAffinityTerm",
}

#: non-pointer ``metav1.Time``/``MicroTime``: written as ``null`` when unset
TIMES: dict[str, str] = {
    "CoreV1Event": "firstTimestamp lastTimestamp eventTime",
    "CoreV1EventSeries": "lastObservedTime",
    "EventsV1Event": "eventTime deprecatedFirstTimestamp deprecatedLastTimestamp",
    "EventsV1EventSeries": "lastObservedTime",
    "V1ContainerStateRunning": "startedAt",
    "V1ContainerStateTerminated": "startedAt finishedAt",
    "V1JobCondition": "lastProbeTime lastTransitionTime",
    "V1NamespaceCondition": "lastTransitionTime",
    "V1PodCondition": "lastProbeTime lastTransitionTime",
}

#: lists without ``omitempty``: written even when empty (``null`` when unset); every other empty list or map is left out
KEEP_EMPTY: dict[str, str] = {
    "V1CephFSVolumeSource": "monitors",
    "V1NodeSelector": "nodeSelectorTerms",
    "V1PodExtendedResourceClaimStatus": "requestMappings",
    "V1PodFailurePolicy": "rules",
    "V1PodFailurePolicyOnExitCodesRequirement": "values",
    "V1PodSpec": "containers",
    "V1ProjectedVolumeSource": "sources",
    "V1RBDVolumeSource": "monitors",
    "V1SuccessPolicy": "rules",
}


@cache
def fields(table: str, model: str) -> frozenset[str]:
    """The JSON names a table lists for one model (without ``=zero`` suffixes)."""
    entry: str = globals()[table].get(model, "")
    return frozenset(f.split("=", 1)[0] for f in entry.split())


@cache
def zero_values(model: str) -> tuple[tuple[str, object], ...]:
    """:data:`ZERO_KEPT`'s fields of one model with the zero value each is written with."""
    zeros = {"": "", "0": 0, "false": False}
    out: list[tuple[str, object]] = []
    for f in ZERO_KEPT.get(model, "").split():
        name, _, zero = f.partition("=")
        out.append((name, zeros[zero]))
    return tuple(out)
