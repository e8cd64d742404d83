"""Checks duet's webhook signatures with Standard Webhooks' own Python library (`standardwebhooks`
on PyPI). Reads JSON from stdin: a list of cases {"secret", "raw", "id", "timestamp", "body",
"signature"} (`raw`: the secret's UTF-8 bytes are the key, else it is `whsec_` + base64), and
prints for each {"verified": bool, "error": str | null, "signature": the library's own}."""
import datetime
import json
import sys

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

out = []
for case in json.load(sys.stdin):
    secret = case["secret"].encode() if case["raw"] else case["secret"]
    hook = Webhook(secret)
    headers = {
        "webhook-id": case["id"],
        "webhook-timestamp": str(case["timestamp"]),
        "webhook-signature": case["signature"],
    }
    try:
        hook.verify(case["body"].encode(), headers, json_parse=False)
        verified, error = True, None
    except WebhookVerificationError as e:
        verified, error = False, str(e)
    at = datetime.datetime.fromtimestamp(case["timestamp"], tz=datetime.timezone.utc)
    out.append({
        "verified": verified,
        "error": error,
        "signature": hook.sign(case["id"], at, case["body"]),
    })
json.dump(out, sys.stdout)
