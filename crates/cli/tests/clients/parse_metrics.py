"""Parses a Prometheus text exposition (stdin) with the official client's parser and prints it
as JSON: {family: {"type": ..., "samples": [[name, labels, value], ...]}}. A malformed
exposition is an exception (exit 1)."""
import json
import sys

from prometheus_client.parser import text_string_to_metric_families

out = {}
for family in text_string_to_metric_families(sys.stdin.read()):
    out[family.name] = {
        "type": family.type,
        "samples": [[s.name, s.labels, s.value] for s in family.samples],
    }
json.dump(out, sys.stdout)
