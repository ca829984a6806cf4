{{/* Names and labels. */}}
{{- define "slicemeter.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}{{ .Release.Name | trunc 50 | trimSuffix "-" }}{{- else -}}{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- define "slicemeter.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* selector labels of one component: (dict "root" $ "component" "exporter") */}}
{{- define "slicemeter.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "slicemeter.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- /* The exporter's image: exporter.image (the exporter-only build), or the main image when
its repository is empty. Its tag defaults to the main image's. */ -}}
{{- define "slicemeter.exporterImage" -}}
{{- $i := .Values.exporter.image | default dict -}}
{{- if $i.repository -}}
{{ $i.repository }}:{{ $i.tag | default .Values.image.tag | default .Chart.AppVersion }}
{{- else -}}
{{ include "slicemeter.image" . }}
{{- end -}}
{{- end -}}

{{- define "slicemeter.exporterServiceAccount" -}}
{{- if .Values.serviceAccount.exporter.create -}}{{ .Values.serviceAccount.exporter.name | default (printf "%s-exporter" (include "slicemeter.fullname" .)) }}{{- else -}}{{ .Values.serviceAccount.exporter.name | default "default" }}{{- end -}}
{{- end -}}

{{- define "slicemeter.pricebookConfigMap" -}}
{{ .Values.pricebook.existingConfigMap | default (printf "%s-pricebook" (include "slicemeter.fullname" .)) }}
{{- end -}}

{{/* --kubernetes.default-tier, checked against the price book's tiers where the chart holds the
price book (pricebook.content): a tier it lacks would leave every pod without the tier label
unpriced. An existing ConfigMap is not the chart's to read. */}}
{{- define "slicemeter.defaultTierArg" -}}
{{- $tier := required "exporter.kubernetes.defaultTier is required: the tier of pods without the tier label, one of the price book's tiers" .Values.exporter.kubernetes.defaultTier -}}
{{- if and .Values.pricebook.content (not .Values.pricebook.existingConfigMap) }}
{{- $book := fromYaml .Values.pricebook.content }}
{{- if hasKey $book "Error" }}
{{- fail (printf "pricebook.content: not YAML: %s" $book.Error) }}
{{- end }}
{{- $tiers := list }}
{{- if kindIs "map" $book.tiers }}
{{- $tiers = keys $book.tiers | sortAlpha }}
{{- end }}
{{- if not (has $tier $tiers) }}
{{- fail (printf "exporter.kubernetes.defaultTier %q: not a tier of pricebook.content (%s); expected one of them" $tier (join ", " $tiers | default "none")) }}
{{- end }}
{{- end }}
- --kubernetes.default-tier={{ $tier }}
{{- end -}}

{{/* The Kafka flags of README.md's "Kafka over TLS and SASL", one list item each. */}}
{{- define "slicemeter.kafkaArgs" -}}
- --kafka.brokers={{ required "kafka.brokers is required" .Values.kafka.brokers }}
{{ include "slicemeter.kafkaSecurityArgs" . }}
{{- end -}}

{{/* The --kafka.tls.* and --kafka.sasl.* flags of kafka's values (every Kafka client's). */}}
{{- define "slicemeter.kafkaSecurityArgs" -}}
{{- $k := .Values.kafka -}}
{{- if or $k.tls.enabled $k.tls.caSecret $k.tls.clientCertSecret }}
- --kafka.tls.enable
{{- end }}
{{- if $k.tls.caSecret }}
- --kafka.tls.ca-file=/etc/slicemeter/kafka-ca/{{ $k.tls.caKey }}
{{- end }}
{{- if $k.tls.clientCertSecret }}
- --kafka.tls.cert-file=/etc/slicemeter/kafka-client/tls.crt
- --kafka.tls.key-file=/etc/slicemeter/kafka-client/tls.key
{{- end }}
{{- if $k.tls.serverName }}
- --kafka.tls.server-name={{ $k.tls.serverName }}
{{- end }}
{{- if $k.tls.insecureSkipVerify }}
- --kafka.tls.insecure-skip-verify
{{- end }}
{{- if $k.sasl.mechanism }}
{{- if not (has $k.sasl.mechanism (list "plain" "scram-sha-256" "scram-sha-512")) }}
{{- fail (printf "kafka.sasl.mechanism %q: want plain, scram-sha-256 or scram-sha-512" $k.sasl.mechanism) }}
{{- end }}
- --kafka.sasl.mechanism={{ $k.sasl.mechanism }}
- --kafka.sasl.username={{ required "kafka.sasl.username is required with kafka.sasl.mechanism" $k.sasl.username }}
- --kafka.sasl.password-file=/etc/slicemeter/kafka-sasl/{{ $k.sasl.passwordKey }}
{{- end }}
{{- end -}}

{{- define "slicemeter.kafkaVolumeMounts" -}}
{{- $k := .Values.kafka -}}
{{- if $k.tls.caSecret }}
- {name: kafka-ca, mountPath: /etc/slicemeter/kafka-ca, readOnly: true}
{{- end }}
{{- if $k.tls.clientCertSecret }}
- {name: kafka-client, mountPath: /etc/slicemeter/kafka-client, readOnly: true}
{{- end }}
{{- if $k.sasl.mechanism }}
- {name: kafka-sasl, mountPath: /etc/slicemeter/kafka-sasl, readOnly: true}
{{- end }}
{{- end -}}

{{- define "slicemeter.kafkaVolumes" -}}
{{- $k := .Values.kafka -}}
{{- if $k.tls.caSecret }}
- name: kafka-ca
  secret: {secretName: {{ $k.tls.caSecret }}}
{{- end }}
{{- if $k.tls.clientCertSecret }}
- name: kafka-client
  secret: {secretName: {{ $k.tls.clientCertSecret }}}
{{- end }}
{{- if $k.sasl.mechanism }}
- name: kafka-sasl
  secret: {secretName: {{ required "kafka.sasl.passwordSecret is required with kafka.sasl.mechanism" $k.sasl.passwordSecret }}}
{{- end }}
{{- end -}}

{{/* --clickhouse.dsn (or its variable from a Secret, in clickhouseEnv) and --clickhouse.cluster. */}}
{{- define "slicemeter.clickhouseArgs" -}}
{{- if not .Values.clickhouse.dsnSecret }}
- --clickhouse.dsn={{ required "clickhouse.dsn or clickhouse.dsnSecret is required" .Values.clickhouse.dsn }}
{{- end }}
{{- if .Values.clickhouse.cluster }}
- --clickhouse.cluster={{ .Values.clickhouse.cluster }}
{{- end }}
{{- end -}}

{{- define "slicemeter.clickhouseEnv" -}}
{{- if .Values.clickhouse.dsnSecret }}
- name: SLICEMETER_CLICKHOUSE_DSN
  valueFrom:
    secretKeyRef: {name: {{ .Values.clickhouse.dsnSecret }}, key: {{ .Values.clickhouse.dsnKey }}}
{{- end }}
{{- end -}}

{{/* The probes every role answers (internal/webserver). */}}
{{- define "slicemeter.probes" -}}
livenessProbe:
  httpGet: {path: /healthz, port: http}
  periodSeconds: 10
  timeoutSeconds: 5
  failureThreshold: 6
readinessProbe:
  httpGet: {path: /readyz, port: http}
  periodSeconds: 10
  timeoutSeconds: 5
  failureThreshold: 3
{{- end -}}

{{/* Whether a prometheus-operator object is rendered: (dict "root" $ "enabled" VALUE "kind" KIND).
"auto" renders it only where the cluster serves its kind (helm install and upgrade read the API
server's; helm template knows only what --api-versions names): an install without
prometheus-operator's CRDs would fail on them. true renders it anyway, false never. */}}
{{- define "slicemeter.monitoringEnabled" -}}
{{- $e := toString .enabled -}}
{{- $caps := .root.Capabilities.APIVersions -}}
{{- if or (eq $e "true") (and (eq $e "auto") (or ($caps.Has (printf "monitoring.coreos.com/v1/%s" .kind)) ($caps.Has "monitoring.coreos.com/v1"))) -}}
true
{{- end -}}
{{- end -}}

{{/* The values the chart cannot guess, all of them checked at once: one render says every one
that is missing. Placeholders would render and install, then fail at run time, so there are
no defaults. */}}
{{- define "slicemeter.requiredValues" -}}
{{- $v := .Values -}}
{{- $missing := list -}}
{{- if and (not $v.kafka.brokers) (or $v.exporter.enabled $v.collector.enabled (and $v.attribution.enabled (gt (int $v.attribution.replicas) 1))) -}}
{{- $missing = append $missing "kafka.brokers is required: the Kafka brokers, host:port[,host:port...] (--set kafka.brokers=kafka-0.kafka:9092)" -}}
{{- end -}}
{{- if and (not $v.clickhouse.dsn) (not $v.clickhouse.dsnSecret) (or $v.collector.enabled $v.attribution.enabled) -}}
{{- $missing = append $missing "clickhouse.dsn or clickhouse.dsnSecret is required: ClickHouse's native DSN (--set clickhouse.dsn=clickhouse://clickhouse:9000/slicemeter), or a Secret holding it" -}}
{{- end -}}
{{- if and $v.attribution.enabled (not $v.attribution.auth.existingSecret) (not $v.attribution.auth.content) (not $v.attribution.auth.insecureNoAuth) -}}
{{- $missing = append $missing "attribution.auth: set existingSecret or content (the API auth file; --set attribution.auth.existingSecret=slicemeter-api-auth), or insecureNoAuth" -}}
{{- end -}}
{{- if and (not $v.pricebook.content) (not $v.pricebook.existingConfigMap) -}}
{{- $missing = append $missing "pricebook.content or pricebook.existingConfigMap is required: the price book (--set-file pricebook.content=prices.yaml)" -}}
{{- end -}}
{{- if $missing -}}
{{- fail (printf "values required (deploy/helm/README.md):\n  - %s" (join "\n  - " $missing)) -}}
{{- end -}}
{{- end -}}
