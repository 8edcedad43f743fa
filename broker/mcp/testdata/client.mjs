// client.mjs drives the broker's /mcp facade with the official MCP TypeScript SDK
// (@modelcontextprotocol/sdk, Client over StreamableHTTPClientTransport) for the Go tests of
// broker/mcp (clients_test.go).
//
//   node client.mjs URL KEY [SESSION]
//
// Every request carries `Authorization: Bearer KEY`; the initialize request (the only POST
// without Mcp-Session-Id) also carries `Backchannel-Session: SESSION` when SESSION is given.
//
// It prints JSON lines on stdout. First the outcome of initialize:
//   {"event":"init","ok":true,"status":200,"session":"<Backchannel-Session response header>",
//    "mcp_session":"<Mcp-Session-Id>"}
//   {"event":"init","ok":false,"status":401,"code":401,"name":"...","message":"..."}
// then reads commands from stdin, one JSON object a line, and answers each with events:
//   {"op":"call","id","name","arguments","progress":bool}
//       -> {"event":"progress","id","progress","message"}* then
//          {"event":"result","id","result":{content,isError}} or {"event":"error","id",...}
//   {"op":"abort","id"}   aborts the call id (AbortController): the SDK sends
//                         notifications/cancelled and the call ends with an error event
//   {"op":"list","id"}    -> {"event":"list","id","tools":[names]}
//   {"op":"close"}        ends the MCP session (DELETE; calls in flight are not aborted
//                         first), closes the client and exits 0
// MCP Tasks (the SDK's experimental tasks API, 2025-11-25):
//   {"op":"taskcall","id","name","arguments","ttl"?} -> {"event":"task","id","task"} (CreateTaskResult)
//   {"op":"taskget","id","taskId"}      -> {"event":"task","id","task"}
//   {"op":"taskresult","id","taskId"}   -> {"event":"result","id","result"}
//   {"op":"taskcancel","id","taskId"}   -> {"event":"task","id","task"}
//   {"op":"tasklist","id"}              -> {"event":"tasks","id","tasks"}
//   {"op":"taskstream","id","name","arguments"} runs callToolStream with a task:
//       -> {"event":"streamed","id","kind","task"?}* then {"event":"result",...} or {"event":"error",...}
//   {"op":"elicitanswer","answer"}      the answer of the next elicitation/create (accept);
//                                       each elicitation prints {"event":"elicit","message","meta","schema"}
// Any request answers {"event":"error","id",...} when it fails.
// End of stdin is a close.

import readline from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema, CreateTaskResultSchema, ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [url, key, session = ""] = process.argv.slice(2);
if (!url || !key) {
  process.stderr.write("usage: node client.mjs URL KEY [SESSION]\n");
  process.exit(2);
}

const out = (o) => process.stdout.write(JSON.stringify(o) + "\n");

const errorEvent = (event, id, e) => ({
  event,
  id,
  name: e?.name ?? typeof e,
  code: typeof e?.code === "number" ? e.code : null,
  message: String(e?.message ?? e),
});

// The initialize POST's status and Backchannel-Session header, seen by the fetch wrapper.
let initInfo = { status: 0, session: "" };

async function fetchWithKey(input, init = {}) {
  const headers = new Headers(init.headers ?? {});
  headers.set("Authorization", `Bearer ${key}`);
  const initialize = (init.method ?? "GET").toUpperCase() === "POST" && !headers.has("mcp-session-id");
  if (initialize && session) headers.set("Backchannel-Session", session);
  const res = await fetch(input, { ...init, headers });
  if (initialize) initInfo = { status: res.status, session: res.headers.get("backchannel-session") ?? "" };
  return res;
}

const transport = new StreamableHTTPClientTransport(new URL(url), {
  fetch: fetchWithKey,
  reconnectionOptions: { maxReconnectionDelay: 1000, initialReconnectionDelay: 100, reconnectionDelayGrowFactor: 1.5, maxRetries: 0 },
});
const client = new Client({ name: "backchannel-mcp-ts-test", version: "1.0.0" }, { capabilities: { elicitation: { form: {} } } });
// The answers of the next elicitations, in order (an elicitation with none is declined).
const elicitAnswers = [];
client.setRequestHandler(ElicitRequestSchema, async (req) => {
  out({ event: "elicit", message: req.params.message, meta: req.params._meta ?? {}, schema: req.params.requestedSchema ?? {} });
  const answer = elicitAnswers.shift();
  if (answer === undefined) return { action: "decline" };
  return { action: "accept", content: { answer } };
});
let closing = false;
// Errors of the transport once the session is being closed (the standalone SSE stream ends
// with the session) are expected; others go to stderr, which the test shows when it fails.
client.onerror = (e) => closing || process.stderr.write(`client error: ${e?.stack ?? e}\n`);

try {
  await client.connect(transport);
} catch (e) {
  out({ ...errorEvent("init", undefined, e), ok: false, status: initInfo.status });
  await client.close().catch(() => {});
  process.exit(0);
}
out({ event: "init", ok: true, status: initInfo.status, session: initInfo.session, mcp_session: transport.sessionId ?? "" });

const calls = new Map(); // id -> AbortController

// close ends the MCP session like an application that is done: DELETE, then close the client.
// Calls still in flight are not aborted first (no notifications/cancelled): the session's end
// is what ends them.
async function close() {
  if (closing) return;
  closing = true;
  await transport.terminateSession().catch((e) => process.stderr.write(`terminateSession: ${e}\n`));
  await client.close().catch((e) => process.stderr.write(`close: ${e}\n`));
  out({ event: "closed" });
  process.exit(0);
}

function call(cmd) {
  const ac = new AbortController();
  calls.set(cmd.id, ac);
  const options = { signal: ac.signal, timeout: 600000 };
  if (cmd.progress) {
    options.onprogress = (p) => out({ event: "progress", id: cmd.id, progress: p.progress, message: p.message ?? "" });
  }
  client
    .callTool({ name: cmd.name, arguments: cmd.arguments ?? {} }, undefined, options)
    .then((r) => out({ event: "result", id: cmd.id, result: { content: r.content, isError: r.isError === true } }))
    .catch((e) => out(errorEvent("error", cmd.id, e)))
    .finally(() => calls.delete(cmd.id));
}

const rl = readline.createInterface({ input: process.stdin });
rl.on("line", (line) => {
  if (!line.trim()) return;
  let cmd;
  try {
    cmd = JSON.parse(line);
  } catch (e) {
    process.stderr.write(`bad command ${line}: ${e}\n`);
    return;
  }
  switch (cmd.op) {
    case "call":
      call(cmd);
      break;
    case "abort":
      calls.get(cmd.id)?.abort("cancelled by the test");
      break;
    case "list":
      client
        .listTools()
        .then((r) => out({ event: "list", id: cmd.id, tools: r.tools.map((t) => t.name) }))
        .catch((e) => out(errorEvent("error", cmd.id, e)));
      break;
    case "close":
      close();
      break;
    case "taskcall":
      client
        .request({ method: "tools/call", params: { name: cmd.name, arguments: cmd.arguments ?? {}, task: cmd.ttl ? { ttl: cmd.ttl } : {} } }, CreateTaskResultSchema)
        .then((r) => out({ event: "task", id: cmd.id, task: r.task }))
        .catch((e) => out(errorEvent("error", cmd.id, e)));
      break;
    case "taskget":
      client.experimental.tasks
        .getTask(cmd.taskId)
        .then((t) => out({ event: "task", id: cmd.id, task: t }))
        .catch((e) => out(errorEvent("error", cmd.id, e)));
      break;
    case "taskresult":
      client.experimental.tasks
        .getTaskResult(cmd.taskId, CallToolResultSchema, { timeout: 600000 })
        .then((r) => out({ event: "result", id: cmd.id, result: { content: r.content, isError: r.isError === true }, meta: r._meta ?? {} }))
        .catch((e) => out(errorEvent("error", cmd.id, e)));
      break;
    case "taskcancel":
      client.experimental.tasks
        .cancelTask(cmd.taskId)
        .then((t) => out({ event: "task", id: cmd.id, task: t }))
        .catch((e) => out(errorEvent("error", cmd.id, e)));
      break;
    case "tasklist":
      client.experimental.tasks
        .listTasks()
        .then((r) => out({ event: "tasks", id: cmd.id, tasks: r.tasks }))
        .catch((e) => out(errorEvent("error", cmd.id, e)));
      break;
    case "taskstream":
      (async () => {
        const stream = client.experimental.tasks.callToolStream(
          { name: cmd.name, arguments: cmd.arguments ?? {} },
          CallToolResultSchema,
          { task: { ttl: 600000 }, timeout: 600000 },
        );
        for await (const m of stream) {
          if (m.type === "result") {
            out({ event: "result", id: cmd.id, result: { content: m.result.content, isError: m.result.isError === true } });
            return;
          }
          if (m.type === "error") {
            out(errorEvent("error", cmd.id, m.error));
            return;
          }
          out({ event: "streamed", id: cmd.id, kind: m.type, task: m.task });
        }
        out({ event: "error", id: cmd.id, name: "Error", code: null, message: "the stream ended without a result" });
      })().catch((e) => out(errorEvent("error", cmd.id, e)));
      break;
    case "elicitanswer":
      elicitAnswers.push(cmd.answer);
      break;
    default:
      process.stderr.write(`unknown command ${line}\n`);
  }
});
rl.on("close", () => close());
