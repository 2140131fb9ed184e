// Drives `harness rpc --offline` with pi's own RpcClient, unchanged, and prints what it saw.
//
// Usage: node rpc_driver.mjs <pi-package-dir> <shim.cjs> <work-dir> <args-json>
//   The shim is the two-line node script RpcClient's cliPath points at: it runs
//   `harness rpc ARGS...` (RpcClient passes `--mode rpc`, which the shim drops).
//
// Prints one JSON object: every step's result (responses' data, the events of each run) for
// the Python test (tests/pi/test_rpc_client.py) to check against the session files.

import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [pkgDir, shim, workDir, argsJson] = process.argv.slice(2);
const { RpcClient } = await import(pathToFileURL(join(pkgDir, "dist", "index.js")).href);

const client = new RpcClient({ cliPath: shim, cwd: workDir, args: JSON.parse(argsJson) });
const out = {};
const events = [];
client.onEvent((event) => events.push(event));

// Approvals come as pi's extension UI requests: answered here as a UI would.
const asked = [];
client.onEvent((event) => {
  if (event.type === "extension_ui_request" && event.method === "select") {
    asked.push(event);
    const value = event.permission?.input?.command === "echo no" ? "Deny" : "Allow once";
    client.process.stdin.write(JSON.stringify({ type: "extension_ui_response", id: event.id, value }) + "\n");
  }
});

function since(start, type) {
  return events.slice(start).filter((e) => e.type === type);
}

function waitFor(predicate, timeout = 30000) {
  return new Promise((resolve, reject) => {
    const found = events.find(predicate);
    if (found) return resolve(found);
    const timer = setTimeout(() => reject(new Error("timed out waiting for an event")), timeout);
    const stop = client.onEvent((event) => {
      if (predicate(event)) {
        clearTimeout(timer);
        stop();
        resolve(event);
      }
    });
  });
}

await client.start();
try {
  // 1. A prompt with its streamed events.
  let start = events.length;
  const run1 = await client.promptAndWait("hello");
  out.prompt = {
    types: run1.map((e) => e.type),
    deltas: run1
      .filter((e) => e.type === "message_update")
      .map((e) => e.assistantMessageEvent),
    ends: run1.filter((e) => e.type === "message_end").map((e) => e.message),
  };

  // 2. Steer and follow up during a run.
  start = events.length;
  const idle2 = client.waitForIdle();
  await client.prompt("count 60");
  await waitFor((e, i) => events.indexOf(e) >= start && e.type === "message_update");
  await client.steer("steered");
  await client.followUp("followed");
  await idle2;
  out.steer = {
    queues: since(start, "queue_update"),
    users: since(start, "message_end").filter((e) => e.message.role === "user").map((e) => e.message.content),
    turns: since(start, "turn_start").length,
  };

  // 3. Abort mid-stream: the partial reply is kept.
  start = events.length;
  const idle3 = client.waitForIdle();
  await client.prompt("count 2000");
  await waitFor((e) => events.indexOf(e) >= start && e.type === "message_update" && e.assistantMessageEvent.type === "text_delta");
  await client.abort();
  await idle3;
  out.abort = { ends: since(start, "message_end").map((e) => e.message) };

  // 4. A bash call from the model, approved through the protocol; and one denied.
  start = events.length;
  await client.promptAndWait("!echo approved");
  await client.promptAndWait("!echo no");
  out.approvals = {
    asked: asked.map((a) => ({ title: a.title, options: a.options, permission: a.permission })),
    decisions: since(start, "permission_decision"),
    results: since(start, "tool_execution_end").map((e) => ({ isError: e.isError, result: e.result })),
  };

  // 5. State and messages, to compare with the session file.
  out.state = await client.getState();
  out.messages = await client.getMessages();
  out.lastText = await client.getLastAssistantText();

  // 6. A malformed line: an error response (no id: it reaches the listeners), then on.
  start = events.length;
  client.process.stdin.write("this is not json\n");
  client.process.stdin.write('{"type": "no_such_command", "id": "x1"}\n');
  await waitFor((e) => events.indexOf(e) >= start && e.type === "response" && e.command === "parse");
  await waitFor((e) => events.indexOf(e) >= start && e.type === "response" && e.command === "no_such_command");
  out.malformed = events.slice(start).filter((e) => e.type === "response");
  out.stateAfterMalformed = await client.getState();

  // 7. Compact, name, stats, export.
  start = events.length;
  out.compact = await client.compact("keep the numbers");
  out.compactEvents = events.slice(start).filter((e) => e.type.startsWith("compaction_"));
  await client.setSessionName("rpc session");
  out.named = await client.getState();
  out.stats = await client.getSessionStats();
  out.exported = await client.exportHtml("export.html");
  out.commands = await client.getCommands();
  try {
    await client.exportHtml("/tmp/../etc/harness-rpc-test.html");
    out.exportOutside = "written";
  } catch (error) {
    out.exportOutside = String(error.message);
  }

  // 8. Fork from a user message (pi's: before it, its text returned), then back.
  const first = out.state.sessionFile;
  out.forkMessages = await client.getForkMessages();
  out.fork = await client.fork(out.forkMessages[1].entryId);
  out.forked = await client.getState();
  out.forkedMessages = await client.getMessages();

  // 9. A new session, then back to the first one.
  out.newSession = await client.newSession();
  out.fresh = await client.getState();
  out.switched = await client.switchSession(first);
  out.back = await client.getState();
  try {
    await client.switchSession(process.env.OUTSIDE_SESSION);
    out.switchOutside = "switched";
  } catch (error) {
    out.switchOutside = String(error.message);
  }

  // 10. The protocol's own bash (gated: asked, then run); its result joins the context.
  out.bash = await client.bash("echo from-rpc");
  out.afterBash = await client.getMessages();
} catch (error) {
  out.error = String(error.stack || error);
  out.stderr = client.getStderr();
} finally {
  await client.stop();
}
process.stdout.write(JSON.stringify(out));
