// Package deploy holds what operators deploy beside the binary: the Grafana
// dashboard and Prometheus alert rules; its tests also check the
// repository's docker-compose.yml.
package deploy
