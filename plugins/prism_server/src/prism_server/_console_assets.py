"""The console's stylesheet and script: inline, no build step."""

from __future__ import annotations

__all__ = ("SCRIPT", "STYLE")

STYLE = """
:root { color-scheme: light dark; --accent: #2457c5; --bad: #b3261e; --ok: #1b6e3a; }
* { box-sizing: border-box; }
body { font: 16px/1.5 system-ui, sans-serif; margin: 0 auto; max-width: 60rem; padding: 1rem; }
header { display: flex; gap: 1rem; align-items: baseline; flex-wrap: wrap; }
h1, td, dd { overflow-wrap: anywhere; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: .5rem; border-bottom: 1px solid #8884; }
.card { border: 1px solid #8886; border-radius: .5rem; padding: 1rem; margin: 1rem 0; }
pre, textarea { font: 14px/1.4 ui-monospace, monospace; overflow-x: auto; }
textarea { width: 100%; min-height: 6rem; }
button { font: inherit; min-height: 44px; padding: .4rem 1rem; margin: .25rem .25rem .25rem 0;
  border-radius: .4rem; border: 1px solid var(--accent); background: var(--accent); color: #fff; }
button.secondary { background: transparent; color: var(--accent); }
button.danger { background: var(--bad); border-color: var(--bad); }
button:focus-visible, a:focus-visible, textarea:focus-visible { outline: 3px solid #f5a623; }
.error { color: var(--bad); font-weight: 600; }
.notice { border-left: 4px solid var(--bad); padding: .5rem 1rem; }
.events li { font-family: ui-monospace, monospace; }
@media (max-width: 40rem) { td { display: block; border: 0; padding: .2rem .5rem; }
  tr { display: block; border-bottom: 1px solid #8884; padding: .4rem 0; }
  thead { position: absolute; left: -9999px; }
  td::before { content: attr(data-label) ": "; font-weight: 600; } }
"""

SCRIPT = """
(function () {
  const page = document.getElementById('run');
  if (!page) return;
  const runId = page.dataset.runId;
  const version = Number(page.dataset.version);
  const status = document.getElementById('status');
  const events = document.getElementById('events');
  function buttons(disabled) {
    document.querySelectorAll('button[data-action]').forEach(b => { b.disabled = disabled; });
  }
  function say(text, isError) {
    status.textContent = text;
    status.className = isError ? 'error notice' : '';
  }
  async function send(body, errorSlot) {
    buttons(true);
    say('Sending your decision...', false);
    if (errorSlot) errorSlot.textContent = '';
    let response;
    try {
      response = await fetch('/api/runs/' + encodeURIComponent(runId) + '/resume', {
        method: 'POST', credentials: 'same-origin',
        headers: {'Content-Type': 'application/json', 'Accept': 'text/event-stream'},
        body: JSON.stringify(Object.assign({expected_version: version}, body)),
      });
    } catch (err) { say('The server could not be reached: ' + err, true); buttons(false); return; }
    if (!response.ok) {
      let problem = {code: String(response.status), message: response.statusText};
      try { problem = await response.json(); } catch (err) { /* keep the status line */ }
      if (response.status === 409) {
        say('Someone else decided this run already (or it changed). Reload to see it now.', true);
        return;
      }
      if (response.status === 422 && errorSlot) {
        errorSlot.textContent = problem.message + ' (' + problem.code + ')';
        say('The decision was refused; nothing was changed.', true);
        buttons(false);
        return;
      }
      say(problem.message + ' (' + problem.code + ')', true);
      buttons(false);
      return;
    }
    say('Decision recorded. The run continues:', false);
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    for (;;) {
      const chunk = await reader.read();
      if (chunk.done) break;
      buffer += decoder.decode(chunk.value, {stream: true});
      let cut;
      while ((cut = buffer.indexOf('\\n\\n')) >= 0) {
        const frame = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const type = (frame.match(/^event: (.*)$/m) || [])[1];
        const data = JSON.parse((frame.match(/^data: (.*)$/m) || [])[1] || 'null');
        const item = document.createElement('li');
        item.textContent = type === 'result'
          ? 'result: ' + data.status + (data.text ? ' - ' + data.text : '')
          : type;
        item.dataset.type = type;
        events.appendChild(item);
        if (type === 'result') {
          say('Status after the decision: ' + data.status + '.', false);
          const again = document.createElement('a');
          again.href = location.pathname; again.textContent = 'Reload this run';
          status.appendChild(document.createTextNode(' ')); status.appendChild(again);
        }
      }
    }
  }
  function resolve(resolution, errorSlot) {
    send({decision: 'continue', resolutions: [resolution]}, errorSlot);
  }
  function parsed(textarea, errorSlot) {
    try { return JSON.parse(textarea.value); }
    catch (err) { errorSlot.textContent = 'Not valid JSON: ' + err.message; return undefined; }
  }
  document.querySelectorAll('button[data-action]').forEach(button => {
    button.addEventListener('click', () => {
      const card = button.closest('[data-call]');
      const errorSlot = card ? card.querySelector('.field-error') : null;
      const action = button.dataset.action;
      const approval = card ? card.dataset.approval : null;
      const call = card ? card.dataset.call : null;
      const editor = card ? card.querySelector('textarea') : null;
      if (action === 'approve' || action === 'deny' || action === 'approve_run') {
        const outcome = {approve: 'allow_once', deny: 'reject_once',
          approve_run: 'allow_for_run'}[action];
        send({decisions: [{approval_id: approval, outcome: outcome}]}, errorSlot);
      } else if (action === 'edit') {
        const value = parsed(editor, errorSlot);
        if (value === undefined) return;
        send({decisions: [{approval_id: approval, outcome: 'allow_once',
          modified_arguments: value}]}, errorSlot);
      } else if (action === 'answer') {
        const value = parsed(editor, errorSlot);
        if (value === undefined) return;
        send({decisions: [{approval_id: approval, outcome: 'allow_once',
          elicitation: value}]}, errorSlot);
      } else if (action === 'completed') {
        const value = parsed(editor, errorSlot);
        if (value === undefined) return;
        resolve({tool_call_id: call, outcome: 'completed', result: value}, errorSlot);
      } else if (action === 'not_started') {
        resolve({tool_call_id: call, outcome: 'not_started'}, errorSlot);
      } else if (action === 'failed') {
        resolve({tool_call_id: call, outcome: 'failed', reason: 'marked failed in the console'},
          errorSlot);
      }
    });
  });
})();
"""
