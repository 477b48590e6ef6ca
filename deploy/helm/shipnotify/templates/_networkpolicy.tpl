{{/* Egress rules the NetworkPolicies share. */}}
{{- define "shipnotify.egressTo" -}}
{{- /* One egress rule: the given peers (none: any) on the given TCP ports. */ -}}
- ports:
    {{- range .ports }}
    - protocol: TCP
      port: {{ . }}
    {{- end }}
  {{- with .to }}
  to:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
{{- define "shipnotify.egressDNS" -}}
- ports:
    - protocol: UDP
      port: 53
    - protocol: TCP
      port: 53
  {{- with .dns }}
  to:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
{{- define "shipnotify.egressProviders" -}}
- ports:
    {{- range .ports }}
    - protocol: TCP
      port: {{ . }}
    {{- end }}
  to:
    - ipBlock:
        cidr: 0.0.0.0/0
        except:
          {{- toYaml .except | nindent 10 }}
{{- end }}
