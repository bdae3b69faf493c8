// A client program written against the vendor's Node SDK (@moonshot-ai/kimi-agent-sdk), used
// unchanged: one session, two prompts, an approval answered, an external tool of the client's.
// The agent it spawns is the SDK's `executable` option (the SDK adds `--session <uuid>
// --work-dir DIR --wire --no-thinking`), so a wrapper script can put `wire-proxy --db X --` or
// `wire-replay X --serve` in its place. The SDK ends the session with SIGTERM.
//
//   node kimi_sdk_client.mjs SDK_PREFIX EXECUTABLE WORK_DIR
//
// SDK_PREFIX is the npm prefix that holds the SDK (.peers/node-sdk). What the program does can
// be changed from the environment, to see a replay catch it:
//   SDK_APPROVAL   the answer to every approval request (approve, approve_for_session, reject);
//                  default approve
//   SDK_PROMPT_1, SDK_PROMPT_2   the two prompts
//   SDK_SESSION_ID the session id (default: the SDK's own random uuid)
// It prints one JSON line on stdout: what each turn saw, the SDK error that ended it if one did,
// and the agent's exit code as the SDK saw it (from the SDK's own protocol log; null when the
// agent was killed by a signal).

import { createRequire } from "node:module";
import { join } from "node:path";
import { format } from "node:util";

const [sdkPrefix, executable, workDir] = process.argv.slice(2);
if (!sdkPrefix || !executable || !workDir) {
  console.error("usage: node kimi_sdk_client.mjs SDK_PREFIX EXECUTABLE WORK_DIR");
  process.exit(2);
}
// the SDK and its peer zod from that prefix (this file lives outside it); one zod instance
const require = createRequire(join(sdkPrefix, "package.json"));
const { createSession, createExternalTool, enableLogs, setLogSink } =
  require("@moonshot-ai/kimi-agent-sdk");
const { z } = require("zod");

const approval = process.env.SDK_APPROVAL || "approve";
const prompts = [
  process.env.SDK_PROMPT_1 || "Run echo hello",
  process.env.SDK_PROMPT_2 || "What is the weather in Paris?",
];

const agentExits = [];
setLogSink((...args) => {
  const m = /Process exited with code: (\S+)/.exec(format(...args));
  if (m) agentExits.push(Number.isNaN(Number(m[1])) ? null : Number(m[1]));
});
enableLogs("kimi-sdk:protocol");

const toolCalls = [];
const weather = createExternalTool({
  name: "lookup_weather",
  description: "Look up the current weather for a city.",
  parameters: z.object({ city: z.string().describe("The city") }),
  handler: async ({ city }) => {
    toolCalls.push(city);
    return { output: `Sunny, 21 C in ${city}`, message: "weather found" };
  },
});

const session = createSession({
  workDir,
  executable,
  externalTools: [weather],
  ...(process.env.SDK_SESSION_ID ? { sessionId: process.env.SDK_SESSION_ID } : {}),
});

const out = { turns: [], approvals: [], tool_calls: toolCalls, error: null };
try {
  for (const content of prompts) {
    const turn = session.prompt(content);
    const seen = { prompt: content, events: [], text: "", status: null };
    for await (const event of turn) {
      seen.events.push(event.type);
      if (event.type === "ContentPart" && event.payload.type === "text") {
        seen.text += event.payload.text;
      } else if (event.type === "ApprovalRequest") {
        out.approvals.push({ sender: event.payload.sender, description: event.payload.description,
                             answer: approval });
        await turn.approve(event.payload.id, approval);
      }
    }
    seen.status = (await turn.result).status;
    out.turns.push(seen);
  }
} catch (err) {
  out.error = `${err?.name ?? "Error"}: ${err?.message ?? err}`;
} finally {
  await session.close(); // SIGTERM to the agent, as every SDK session ends
}
out.agent_exits = agentExits;
process.stdout.write(JSON.stringify(out) + "\n");
process.exitCode = out.error ? 1 : 0;
