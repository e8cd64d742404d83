"""A real SMTP server for duet's email tests, on `aiosmtpd` (scripts/test-servers installs it).

    smtp_server.py PORT CERT KEY USER PASSWORD MAILDIR

It listens on 127.0.0.1:PORT (0: a port the OS picks) and prints `PORT <n>` on stdout's first
line once listening. STARTTLS is required (with CERT and KEY, PEM files), and so is AUTH
(PLAIN or LOGIN, over TLS only) as USER with PASSWORD; other credentials get `535`. Each
message accepted is written to MAILDIR as `<n>.eml` (the bytes received), then `<n>.json`
(the envelope and the message as Python's `email` package parses it: headers, and each leaf
part's content type and decoded text), written whole under a temporary name and renamed, so
a `.json` present is complete; then `MESSAGE <n>` is printed on stdout (what a test waits
on). Recipients `reject@…` get `550` (permanent) and `busy@…` get `451` (transient), for the
tests of how failures read.
"""

import asyncio
import email
import email.policy
import json
import os
import socket
import ssl
import sys

from aiosmtpd.smtp import SMTP, AuthResult, LoginPassword


def main():
    port, cert, key, user, password, maildir = sys.argv[1:7]
    user, password = user.encode(), password.encode()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)

    def authenticator(server, session, envelope, mechanism, auth_data):
        ok = (
            isinstance(auth_data, LoginPassword)
            and auth_data.login == user
            and auth_data.password == password
        )
        # Not `handled`: aiosmtpd answers `535` itself.
        return AuthResult(success=ok, handled=False)

    class Handler:
        def __init__(self):
            self.count = 0

        async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
            local = address.split("@", 1)[0].lower()
            if local == "reject":
                return "550 5.1.1 No such mailbox here"
            if local == "busy":
                return "451 4.3.0 Try again later"
            envelope.rcpt_tos.append(address)
            return "250 OK"

        async def handle_DATA(self, server, session, envelope):
            self.count += 1
            n = self.count
            raw = envelope.original_content or envelope.content
            with open(os.path.join(maildir, f"{n}.eml"), "wb") as f:
                f.write(raw)
            message = email.message_from_bytes(raw, policy=email.policy.default)
            parts = []
            for part in message.walk():
                if part.is_multipart():
                    continue
                parts.append(
                    {
                        "contentType": part.get_content_type(),
                        "charset": part.get_content_charset(),
                        "text": part.get_content(),
                    }
                )
            parsed = {
                "mailFrom": envelope.mail_from,
                "rcptTos": envelope.rcpt_tos,
                "authenticated": bool(session.authenticated),
                "tls": session.ssl is not None,
                "contentType": message.get_content_type(),
                "headers": [[k, str(v)] for k, v in message.items()],
                "parts": parts,
            }
            tmp = os.path.join(maildir, f".{n}.json.tmp")
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(parsed, f)
            os.rename(tmp, os.path.join(maildir, f"{n}.json"))
            print(f"MESSAGE {n}", flush=True)
            return f"250 2.0.0 Accepted as message {n}"

    handler = Handler()
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)

    def factory():
        return SMTP(
            handler,
            hostname="duet-test-smtp",
            tls_context=context,
            require_starttls=True,
            auth_required=True,
            auth_require_tls=True,
            authenticator=authenticator,
            loop=loop,
        )

    server = loop.run_until_complete(
        loop.create_server(factory, host="127.0.0.1", port=int(port), family=socket.AF_INET)
    )
    print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
    loop.run_forever()


if __name__ == "__main__":
    main()
