"""Planted secrets, one of each kind the redaction policy must catch, and how to find a leak.

Shared by the redactor's own tests (`tests/replay/test_redact.py`) and the test of every exit
(`tests/phoenix/test_secrets.py`).
"""

from __future__ import annotations

PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAr1ZqK9vX3pLmQnT8wYhJ\n"
    "-----END RSA PRIVATE KEY-----"
)
SECRETS = {
    "openai key": "sk-proj-Q2h8ZyX1vB7nM4kL0pR6tW9eA3sD5fG",
    "anthropic key": "sk-ant-api03-Lm3Nb7Vc1Xz9Qw5Er2Ty8Ui4Op6As0Df",
    "aws access key id": "AKIAZ7QW4ER5TY6UI8OP",
    "aws secret access key": "aws_secret_access_key=Jq7Zp2Lk9Vx4Bn6Mc1Qw8Er3Ty5Ui0OpAsDfGhJk",
    "github token": "ghp_Xy7Qw2Er9Ty4Ui1Op6As3Df8Gh5Jk0LzXcVb",
    "slack token": "xoxb-246813579024-1357924680135-Ab3Cd5Ef7Gh9Ij1Kl3Mn5Op",
    "jwt": (
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJwbGFuZ2F0ZS10ZXN0In0."
        "Qm9Zp8Xv2Lk7Nb4Vc1Xz9Qw5Er2Ty8Ui4Op6As0Df"
    ),
    "private key": PEM,
    "bearer header": "Authorization: Bearer Zk8Qp3Lm7Nv2Bx9Cw4Ey6Ru1Ti5",
    "password in a url": "postgres://admin:Tr0ub4dor-Horse-42@db.internal.example/prod",
    "stripe key": "sk_live_51Hq8ZpLk2Vx7Bn4Mc9Qw1Er6Ty3",
    "google api key": "AIzaSyQ7w2E9r4T1y6U8i3O5p0A2s4D6f8G1h3J",
    "key-like context": '{"client_secret": "Wv4Xq9Zp2Lk7Nb3Vc8Xz1Qw"}',
    "user pattern": "ACME-774411",
}
"""What is planted; the parts checked for are in `cores`."""
ENVIRONMENT_SECRET = "env-only-value-5f2c9a71d3"
"""The value of a secret-looking environment variable: redacted wherever it shows up."""
EVERYTHING = " | ".join([*SECRETS.values(), ENVIRONMENT_SECRET])


def cores() -> dict[str, str]:
    """The part of each secret that must never be found (what a redaction would remove)."""
    found = {
        name: text.split("=", 1)[-1] if name == "aws secret access key" else text
        for name, text in SECRETS.items()
    }
    found["private key"] = "MIIEowIBAAKCAQEAr1ZqK9vX3pLmQnT8wYhJ"
    found["bearer header"] = "Zk8Qp3Lm7Nv2Bx9Cw4Ey6Ru1Ti5"
    found["password in a url"] = "Tr0ub4dor-Horse-42"
    found["key-like context"] = "Wv4Xq9Zp2Lk7Nb3Vc8Xz1Qw"
    found["environment"] = ENVIRONMENT_SECRET
    return found


def leaks(text: str) -> list[str]:
    """The kinds of secret `text` holds (JSON-escaped forms included)."""
    escaped = text.replace("\\n", "\n").replace('\\"', '"')
    return [name for name, core in cores().items() if core in text or core in escaped]
