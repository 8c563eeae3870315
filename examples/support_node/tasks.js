// The agent's own task list: two function tools the model may call, and the list itself, which
// the agent pins as a system message right after its instructions before every model call. A
// model that loses the request from its context (sim:forgetful sees the system messages and
// the last six others) still sees which tasks are open. The same todo dialect and plan format
// as plangate's (harness/plans), so its simulated models read the list.

const MARKS = { pending: "[ ]", in_progress: "[~]", completed: "[x]", blocked: "[!]" };
const STATUSES = Object.keys(MARKS);

export const TASK_LIST_INSTRUCTIONS =
  "When a request asks for two or more things, first write them as a todo list with " +
  "todo_write. Then work through it: mark an item in_progress, do it, mark it completed (or " +
  "blocked, with the reason). The current list is pinned after these instructions.";

export const TASK_TOOLS = [
  tool("todo_write", "Write the plan: replace the whole todo list with these items, in order.", {
    todos: {
      type: "array",
      description: "The items, each with its `content`.",
      items: {
        type: "object",
        properties: { content: { type: "string" } },
        required: ["content"],
        additionalProperties: false,
      },
    },
  }),
  tool("todo_update", "Change the status of one todo item.", {
    item_id: { type: "integer", description: "The item's number, from 1." },
    status: { enum: STATUSES, description: "The new status." },
    reason: { type: "string", description: "Why the item is blocked (required for blocked)." },
  }, ["item_id", "status"]),
];

export class TaskList {
  /** The items, in order: `{id, text, status, reason}`. */
  items = [];

  /** Whether `name` is one of the list's tools (not the desk's). */
  handles(name) {
    return TASK_TOOLS.some((t) => t.function.name === name);
  }

  /** Run a todo tool call; a mistake the model can fix comes back as the result's text. */
  call(name, args) {
    return name === "todo_write" ? this.write(args.todos) : this.update(args);
  }

  write(todos) {
    if (!Array.isArray(todos) || todos.length === 0 || !todos.every((t) => t?.content)) {
      return "todo_write needs at least one item, each with its content.";
    }
    this.items = todos.map((t, i) => ({ id: i + 1, text: oneLine(t.content), status: "pending" }));
    return `Todo list saved with ${this.items.length} items.`;
  }

  update({ item_id: id, status, reason }) {
    const item = this.items[id - 1];
    if (!item) return `There is no item ${id}; item ids are 1 to ${this.items.length}.`;
    if (!STATUSES.includes(status)) return `Use one of these statuses: ${STATUSES.join(", ")}.`;
    if (status === "blocked" && !reason?.trim()) return `Blocking item ${id} needs a reason.`;
    Object.assign(item, { status, reason: status === "blocked" ? oneLine(reason) : undefined });
    return `Item ${id} is now ${status}.`;
  }

  /** The plan message: `# Plan`, one line an item, then what to do next. */
  render() {
    const lines = this.items.map(({ id, text, status, reason }) => {
      const note = { in_progress: " ← CURRENT", blocked: ` (blocked: ${reason})` }[status] ?? "";
      return `${MARKS[status]} ${id}. ${text}${note}`;
    });
    return ["# Plan", ...lines, this.next()].join("\n");
  }

  /** The plan's last line: what to do next. */
  next() {
    const active = this.items.find((i) => i.status === "in_progress");
    const pending = this.items.find((i) => i.status === "pending");
    if (this.items.length === 0) {
      return "Next: no plan yet. If the request has two or more tasks, write the plan first.";
    }
    if (active) return `Next: work on "${active.text}"; mark it completed as soon as it is done.`;
    if (pending) return `Next: mark "${pending.text}" in_progress and work on it.`;
    return "Next: every item is completed or blocked; answer with a summary.";
  }
}

function tool(name, description, properties, required = Object.keys(properties)) {
  const parameters = { type: "object", properties, required, additionalProperties: false };
  return { type: "function", function: { name, description, parameters } };
}

function oneLine(text) {
  return String(text).split(/\s+/).filter(Boolean).join(" ");
}
