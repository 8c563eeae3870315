// The support desk in Node, run by plangate as `command:node examples/support_node/agent.js`.
//
// One JSON turn per line on standard input, one JSON reply per line on standard output
// (`{"answer", "messages"}`, or `{"error"}` when the turn failed); logs go to standard error.
// The model is the official `openai` client at the turn's `model.base_url` (else
// OPENAI_BASE_URL); the desk's tools come from the MCP server at SUPPORT_MCP_URL, through the
// official MCP client. plangate points that variable at its MCP gateway, which records the
// calls or answers them from the golden's tool cassette: the agent knows nothing of that.
//
// Two settings, from the environment (a gate side's `env`):
//   MAX_STEPS  the most model calls a turn (30); past it the agent answers "I could not finish."
//   TASK_LIST  "0" turns the agent's own task list off (tasks.js); on by default.

import { createInterface } from "node:readline";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import OpenAI from "openai";

import { TASK_LIST_INSTRUCTIONS, TASK_TOOLS, TaskList } from "./tasks.js";

// plangate.harness.get_domain("support").instructions, as the Python examples send it (the
// test checks that the two are the same).
const INSTRUCTIONS =
  "You are a customer support agent for an online home goods store. Look customers and orders " +
  "up with the tools before you act, and quote order ids, item ids and amounts exactly. You may " +
  "refund delivered items up to $200.00 within 30 days of delivery; anything else needs a " +
  "manager: escalate it and mark the task blocked.";
const STOPPED = "I could not finish.";
const MAX_STEPS = Number(process.env.MAX_STEPS ?? "30");
const TASK_LIST = process.env.TASK_LIST !== "0";
if (!Number.isInteger(MAX_STEPS) || MAX_STEPS < 1) {
  throw new Error(`MAX_STEPS=${process.env.MAX_STEPS}: give a number of model calls, 1 or more`);
}

/** Connect to the desk's MCP server; its tools as OpenAI function tools, listed once. */
async function connectDesk(url) {
  if (!url) throw new Error("SUPPORT_MCP_URL is not set: give the desk's MCP server URL");
  const mcp = new Client({ name: "support-node", version: "0.1.0" });
  await mcp.connect(new StreamableHTTPClientTransport(new URL(url)));
  const { tools } = await mcp.listTools();
  const offered = tools.map(({ name, description, inputSchema }) => ({
    type: "function",
    function: { name, description: description ?? name, parameters: inputSchema },
  }));
  return { mcp, tools: offered };
}

/** One OpenAI client per endpoint (plangate names the same one, turn after turn). */
const clients = new Map();
function clientFor(model = {}) {
  const baseURL = model.base_url ?? process.env.OPENAI_BASE_URL;
  const apiKey = model.api_key ?? process.env.OPENAI_API_KEY ?? "plangate-local";
  const key = `${baseURL} ${apiKey}`;
  if (!clients.has(key)) clients.set(key, new OpenAI({ baseURL, apiKey }));
  return clients.get(key);
}

/** Run one turn: model calls and tool calls until the model answers, MAX_STEPS at most. */
async function runTurn(turn, desk) {
  const client = clientFor(turn.model);
  const tasks = TASK_LIST ? new TaskList() : null;
  const tools = tasks ? [...desk.tools, ...TASK_TOOLS] : desk.tools;
  const system = tasks ? `${INSTRUCTIONS}\n\n${TASK_LIST_INSTRUCTIONS}` : INSTRUCTIONS;
  const messages = [{ role: "user", content: turn.request }]; // this turn's, from the request
  for (let step = 0; step < MAX_STEPS; step++) {
    const context = [
      { role: "system", content: system },
      ...(tasks ? [{ role: "system", content: tasks.render() }] : []), // pinned, kept in view
      ...(turn.history ?? []),
      ...messages,
    ];
    const reply = await client.chat.completions.create({
      model: turn.model?.name ?? "plangate",
      messages: context,
      tools,
    });
    const { content } = reply.choices[0].message;
    const calls = reply.choices[0].message.tool_calls ?? [];
    if (calls.length === 0) {
      messages.push({ role: "assistant", content: content ?? "" });
      return { answer: content ?? "", messages };
    }
    messages.push({ role: "assistant", content: content || null, tool_calls: calls.map(wireCall) });
    for (const call of calls) {
      const result = await runTool(call.function, desk, tasks);
      messages.push({ role: "tool", tool_call_id: call.id, content: result });
    }
  }
  // Stopped. plangate's endpoint never saw the last tool results nor this answer: the reply's
  // messages carry them, so the next turn's history does not end in calls without results.
  messages.push({ role: "assistant", content: STOPPED });
  return { answer: STOPPED, messages };
}

/** One tool call's result as the model reads it: a desk call over MCP, or a todo call. */
async function runTool({ name, arguments: text }, desk, tasks) {
  let args;
  try {
    args = JSON.parse(text || "{}");
  } catch (error) {
    return `The arguments of ${name} are not valid JSON (${error.message}). Call again.`;
  }
  if (tasks?.handles(name)) return tasks.call(name, args);
  const result = await desk.mcp.callTool({ name, arguments: args });
  return result.content
    .filter((part) => part.type === "text")
    .map((part) => part.text)
    .join("\n");
}

function wireCall({ id, type, function: { name, arguments: args } }) {
  return { id, type: type ?? "function", function: { name, arguments: args } };
}

async function main() {
  const desk = await connectDesk(process.env.SUPPORT_MCP_URL);
  for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
    if (!line.trim()) continue;
    let reply;
    try {
      reply = await runTurn(JSON.parse(line), desk);
    } catch (error) {
      console.error(`turn failed: ${error.stack ?? error}`);
      reply = { error: `${error.constructor?.name ?? "Error"}: ${error.message}` };
    }
    process.stdout.write(`${JSON.stringify(reply)}\n`);
  }
  await desk.mcp.close();
}

await main();
