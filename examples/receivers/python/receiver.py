"""A service of yours receiving Oncehook's destination calls (docs/destinations.md), in Python
with the standard library only: verify the Standard Webhooks signature (hmac, base64), then apply
the effect and remember the webhook-id in ONE transaction (sqlite3 here; any database with a
unique index works the same), so a repeated call is answered 200 and applies nothing.

    WEBHOOK_SECRET=whsec_... DATABASE=receiver.db PORT=4021 python3 receiver.py
"""

import base64
import hashlib
import hmac
import json
import os
import sqlite3
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SECRET = os.environ["WEBHOOK_SECRET"]  # whsec_<base64>: the destination's secret
KEY = base64.b64decode(SECRET[len("whsec_"):] if SECRET.startswith("whsec_") else SECRET)
TOLERANCE_SECONDS = 5 * 60
DATABASE = os.environ.get("DATABASE", "receiver.db")

db = sqlite3.connect(DATABASE, check_same_thread=False, isolation_level=None)
db.executescript(
    """
    CREATE TABLE IF NOT EXISTS received_webhooks (webhook_id TEXT PRIMARY KEY, type TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS credits (event_id TEXT NOT NULL, amount INTEGER NOT NULL, webhook_id TEXT NOT NULL);
    """
)
lock = threading.Lock()  # one writer at a time (sqlite); a server database would use its own locks


def amount_of(envelope) -> int:
    """The amount of a Stripe-shaped event: an invoice's amount_paid, a payment intent's
    amount_received, a charge's amount (0 when the event carries none)."""
    obj = ((envelope.get("data") or {}).get("data") or {}).get("object") or {}
    for field in ("amount_paid", "amount_received", "amount"):
        if isinstance(obj.get(field), int):
            return obj[field]
    return 0


def verified(headers, body: bytes) -> bool:
    """The Standard Webhooks check: HMAC-SHA256 of "<id>.<timestamp>.<body>", compared in
    constant time with each v1 signature; the timestamp within 5 minutes both ways."""
    msg_id = headers.get("webhook-id")
    timestamp = headers.get("webhook-timestamp")
    signatures = headers.get("webhook-signature")
    if not msg_id or not timestamp or not signatures:
        return False
    try:
        if abs(time.time() - int(timestamp)) > TOLERANCE_SECONDS:
            return False
    except ValueError:
        return False
    signed = f"{msg_id}.{timestamp}.".encode() + body
    expected = base64.b64encode(hmac.new(KEY, signed, hashlib.sha256).digest()).decode()
    return any(
        version == "v1" and hmac.compare_digest(signature, expected)
        for version, _, signature in (entry.partition(",") for entry in signatures.split(" "))
    )


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        if not verified(self.headers, body):
            self.send_response(401)
            self.end_headers()
            return
        envelope = json.loads(body)
        webhook_id = self.headers["webhook-id"]
        amount = amount_of(envelope)
        with lock:
            try:
                db.execute("BEGIN IMMEDIATE")
                first = db.execute(
                    "INSERT INTO received_webhooks (webhook_id, type) VALUES (?, ?) ON CONFLICT DO NOTHING",
                    (webhook_id, envelope["type"]),
                ).rowcount
                if first == 1:
                    db.execute("INSERT INTO credits (event_id, amount, webhook_id) VALUES (?, ?, ?)", (envelope["eventId"], amount, webhook_id))
                db.execute("COMMIT")
            except sqlite3.Error:
                db.execute("ROLLBACK")
                self.send_response(503)  # Oncehook retries later with the same webhook-id
                self.end_headers()
                return
        # One line per call: what it was, and whether it applied anything (a repeat applies nothing).
        what = f"applied: credited {amount}" if first == 1 else "a repeat of that webhook-id: nothing applied"
        print(f"{envelope['type']} {envelope['eventId']} (webhook-id {webhook_id}): {what}", flush=True)
        answer = json.dumps({"applied": first == 1}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *_args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", int(os.environ.get("PORT", "4021"))), Receiver)
print(f"receiver listening on {server.server_address[1]}", flush=True)
server.serve_forever()
