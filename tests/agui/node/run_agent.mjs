// Drives a Prism AG-UI endpoint with the official client (@ag-ui/client's HttpAgent) and
// prints what it saw as JSON lines on stdout, one per event and one at the end of each run.
//
// The plan comes on stdin as JSON:
//   {"url", "threadId", "headers"?, "pendingInterrupts"?, "steps": [step, ...]}
// Each step is one runAgent() call on the same HttpAgent:
//   {"message": "text"}                      a new user message, then a run
//   {"answers": {toolCallId: response}}      resume: buildResumeArray over the client's own
//                                            pending interrupts, each answered by its call
//   {"resume": [entry, ...]}                 resume with these entries as they are
// and may also carry "headers" (used from this step on) and "abortOn": an event type on
// which the client aborts the run (HttpAgent.abortRun()); with "abortWhenExists" (a file
// path) the abort waits, after that event, until the file exists (the test creates it once
// the server side reached the point the abort should meet).
// Output lines: {"step", "event"} and then {"step", "end": "resolved" | "rejected", ...};
// an error the client leaves unhandled (a server that dies mid-stream) is a line
// {"step", "unhandled": message}.
import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { HttpAgent, buildResumeArray } from "@ag-ui/client";

function print(line) {
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

function resumeFor(agent, answers) {
  const byInterrupt = {};
  for (const interrupt of agent.pendingInterrupts) {
    const answer = answers[interrupt.toolCallId];
    if (answer !== undefined) byInterrupt[interrupt.id] = answer;
  }
  return buildResumeArray(agent.pendingInterrupts, byInterrupt);
}

let current = null;
process.on("unhandledRejection", (error) => {
  print({ step: current, unhandled: String(error?.message ?? error) });
});

const plan = await readStdin();
const agent = new HttpAgent({
  url: plan.url,
  headers: plan.headers ?? {},
  threadId: plan.threadId,
});
if (plan.pendingInterrupts) agent.pendingInterrupts = plan.pendingInterrupts;

for (const [step, spec] of plan.steps.entries()) {
  current = step;
  if (spec.headers) agent.headers = spec.headers;
  if (spec.message !== undefined) {
    agent.addMessage({ id: randomUUID(), role: "user", content: spec.message });
  }
  const parameters = {};
  try {
    if (spec.answers) parameters.resume = resumeFor(agent, spec.answers);
    if (spec.resume) parameters.resume = spec.resume;
    await agent.runAgent(parameters, {
      onEvent({ event }) {
        print({ step, event });
        if (spec.abortOn === event.type) {
          if (!spec.abortWhenExists) {
            agent.abortRun();
          } else {
            const timer = setInterval(() => {
              if (existsSync(spec.abortWhenExists)) {
                clearInterval(timer);
                agent.abortRun();
              }
            }, 20);
          }
        }
      },
    });
    print({
      step,
      end: "resolved",
      pendingInterrupts: agent.pendingInterrupts,
      messages: agent.messages,
    });
  } catch (error) {
    print({
      step,
      end: "rejected",
      error: String(error?.message ?? error),
      status: error?.status ?? null,
      pendingInterrupts: agent.pendingInterrupts,
    });
  }
}
