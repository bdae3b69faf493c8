"""A tiny Wire client, as a project of yours might have one: it starts the agent command it is
given, asks it to run `echo hello`, answers the approval request, and returns what the agent
said. The plugin tests put it in a project of their own and hand it the `wire_agent` argv."""

import json
import subprocess
import sys


def run(argv, answer="approve"):
    agent = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def send(obj):
        agent.stdin.write(json.dumps(obj) + "\n")
        agent.stdin.flush()

    send({"jsonrpc": "2.0", "method": "initialize", "id": "init-1",
          "params": {"protocol_version": "1.10", "client": {"name": "tiny-client",
                                                            "version": "0.1.0"}}})
    said = []
    for line in agent.stdout:
        msg = json.loads(line)
        params = msg.get("params") or {}
        if msg.get("id") == "init-1":
            send({"jsonrpc": "2.0", "method": "prompt", "id": "p-1",
                  "params": {"user_input": "Run echo hello"}})
        elif msg.get("method") == "request" and params.get("type") == "ApprovalRequest":
            send({"jsonrpc": "2.0", "id": msg["id"],
                  "result": {"request_id": msg["id"], "response": answer}})
        elif msg.get("method") == "event" and params.get("type") == "ContentPart":
            said.append(params["payload"].get("text") or "")
        elif msg.get("id") == "p-1":
            break
    agent.stdin.close()
    agent.stdout.close()
    agent.wait()
    return " ".join(said)


if __name__ == "__main__":
    print(run(sys.argv[1:]))
