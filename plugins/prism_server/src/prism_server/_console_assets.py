"""The console's stylesheet and script: inline, no build step."""

from __future__ import annotations

__all__ = ("SCRIPT", "STYLE")

STYLE = """
:root { color-scheme: light dark; --accent: #2457c5; --bad: #b3261e; --ok: #1b6e3a;
  --muted: #8884; --soft: #8881; }
* { box-sizing: border-box; }
body { font: 16px/1.5 system-ui, sans-serif; margin: 0 auto; max-width: 60rem; padding: 1rem; }
header { display: flex; gap: 1rem; align-items: baseline; flex-wrap: wrap; }
h1, h2, h3, td, dd, .text, code { overflow-wrap: anywhere; }
h1 { font-size: 1.6rem; line-height: 1.2; }
h1 code { font-size: 1rem; display: block; font-weight: 400; }
h2 { margin-top: 2rem; font-size: 1.3rem; }
h3 { font-size: 1.1rem; }
table { border-collapse: collapse; width: 100%; }
caption { text-align: left; font-weight: 600; padding: .5rem 0; }
th, td { text-align: left; padding: .5rem; border-bottom: 1px solid var(--muted);
  vertical-align: top; }
.card { border: 1px solid #8886; border-radius: .5rem; padding: 1rem; margin: 1rem 0; }
pre, textarea { font: 14px/1.4 ui-monospace, monospace; overflow-x: auto; }
pre { background: var(--soft); padding: .5rem; border-radius: .3rem; max-height: 24rem;
  white-space: pre-wrap; overflow-wrap: anywhere; }
textarea { width: 100%; min-height: 6rem; }
textarea.reason { min-height: 3rem; }
label { display: block; font-weight: 600; margin-top: .5rem; }
button { font: inherit; min-height: 44px; padding: .4rem 1rem; margin: .25rem .25rem .25rem 0;
  border-radius: .4rem; border: 1px solid var(--accent); background: var(--accent); color: #fff; }
button.secondary { background: transparent; color: var(--accent); }
button.danger { background: var(--bad); border-color: var(--bad); }
button:focus-visible, a:focus-visible, textarea:focus-visible, select:focus-visible,
  input:focus-visible { outline: 3px solid #f5a623; }
select, input { font: inherit; min-height: 44px; padding: .3rem; max-width: 100%; }
.error, .error-text { color: var(--bad); }
.error { font-weight: 600; }
.notice { border-left: 4px solid var(--bad); padding: .5rem 1rem; }
.note, .hint { color: GrayText; font-size: .9rem; }
.hint { margin: .2rem 0; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; }
dt { font-weight: 600; }
dd { margin: 0; }
.status { display: inline-block; padding: 0 .5rem; border-radius: 1rem; font-weight: 600;
  border: 1px solid currentColor; }
.status-succeeded { color: var(--ok); }
.status-failed, .status-denied, .status-aborted { color: var(--bad); }
.status-suspended { color: var(--accent); }
.tag { display: inline-block; font-size: .8rem; padding: 0 .4rem; border-radius: .3rem;
  border: 1px solid var(--accent); margin-left: .3rem; }
.filter-box summary { cursor: pointer; font-weight: 600; min-height: 44px; padding: .6rem 0; }
.filters { display: flex; flex-wrap: wrap; gap: .5rem 1rem; align-items: end; }
.filters .field { display: flex; flex-direction: column; flex: 1 1 10rem; }
.filters label { margin: 0; }
.views, .pager { display: flex; flex-wrap: wrap; gap: 1rem; margin: 1rem 0; }
.conversation { list-style: none; padding: 0; }
.msg { border-left: 4px solid var(--muted); padding: .3rem .8rem; margin: .8rem 0; }
.msg.user { border-color: var(--accent); }
.msg.assistant { border-color: var(--ok); }
.msg.tool { border-color: #a66b00; }
.who { font-weight: 600; margin: 0; }
.who small { font-weight: 400; color: GrayText; }
.text { white-space: pre-wrap; }
.answer { border-left: 4px solid var(--ok); padding: .3rem .8rem; }
.divider { text-align: center; color: GrayText; border-top: 1px dashed var(--muted);
  margin: 1rem 0; padding-top: .3rem; }
.events li { margin: .2rem 0; }
@media (max-width: 40rem) { td { display: block; border: 0; padding: .2rem .5rem; }
  tr { display: block; border-bottom: 1px solid var(--muted); padding: .4rem 0; }
  thead { position: absolute; left: -9999px; }
  td::before { content: attr(data-label) ": "; font-weight: 600; }
  dl:not(.facts) { grid-template-columns: 1fr; } dl:not(.facts) dd { margin-bottom: .3rem; } }
.decide.done { opacity: .6; }
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
  function json(value) {
    try { return JSON.stringify(value); } catch (err) { return String(value); }
  }
  function problemText(error) {
    if (!error) return '';
    return (error.message || '') + (error.code ? ' (' + error.code + ')' : '');
  }
  // One readable line per event; null for the streaming noise (deltas, message starts).
  function describe(type, data) {
    const name = data && data.name;
    switch (type) {
      case 'agent_started': return 'The run started.';
      case 'agent_resumed': return 'The run resumed (version ' + data.version + ').';
      case 'turn_started': return 'The model is asked (turn ' + data.turn + ').';
      case 'message_finished': {
        const content = (data.message && data.message.content) || [];
        const text = content.filter(b => b.type === 'text').map(b => b.text).join('');
        const calls = content.filter(b => b.type === 'tool_call').map(b => b.name);
        const parts = [];
        if (text) parts.push('The assistant wrote: ' + text);
        if (calls.length) parts.push('The assistant asks to call ' + calls.join(', ') + '.');
        return parts.length ? parts.join(' ') : null;
      }
      case 'tool_execution_started': return 'Running ' + name + ' ' + json(data.arguments) + '.';
      case 'tool_execution_finished': {
        const result = data.result || {};
        return result.error ? name + ' did not succeed: ' + problemText(result.error)
          : name + ' returned ' + json(result.value) + '.';
      }
      case 'tool_execution_error': return name + ' raised: ' + problemText(data.error);
      case 'tool_execution_blocked':
        return name + ' did not run (' + data.reason + '): ' + problemText(data.error);
      case 'agent_suspended': {
        const waiting = ((data.interruption || {}).pending_decisions || []).length;
        return 'The run waits again' + (waiting ? ' for ' + waiting + ' decision(s).' : '.');
      }
      case 'agent_denied': return 'The run was denied' + (data.reason ? ': ' + data.reason : '.');
      case 'agent_finished': return 'The run finished: ' + data.status + '.';
      case 'error': return 'The run ' + (data.status || 'failed') + ': ' + problemText(data.error);
      case 'result':
        return 'Result: ' + data.status + (data.text ? ' - ' + data.text : '')
          + (data.error ? ' - ' + problemText(data.error) : '');
      case 'message_started': case 'message_delta': case 'turn_finished': return null;
      default: return type.replace(/_/g, ' ');
    }
  }
  async function send(body, errorSlot) {
    buttons(true);
    say('Sending your decision...', false);
    if (errorSlot) errorSlot.textContent = '';
    let response;
    try {
      response = await fetch('/runs/' + encodeURIComponent(runId) + '/resume', {
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
        const line = describe(type, data);
        if (line === null) continue;
        const item = document.createElement('li');
        item.textContent = line;
        item.dataset.type = type;
        events.appendChild(item);
        if (type === 'result') {
          document.querySelectorAll('.decide').forEach(s => s.classList.add('done'));
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
  // A decision entry, with the card's reason when one was written.
  function entry(approval, outcome, reason, extra) {
    const decided = Object.assign({approval_id: approval, outcome: outcome}, extra || {});
    if (reason) decided.reason = reason;
    return decided;
  }
  document.querySelectorAll('button[data-action]').forEach(button => {
    button.addEventListener('click', () => {
      const card = button.closest('[data-call], [data-approvals]');
      const errorSlot = card ? card.querySelector('.field-error') : null;
      const action = button.dataset.action;
      const approval = card ? card.dataset.approval : null;
      const call = card ? card.dataset.call : null;
      const editor = card ? card.querySelector('textarea[data-role="editor"]') : null;
      const reasonBox = card ? card.querySelector('textarea[data-role="reason"]') : null;
      const reason = reasonBox ? reasonBox.value.trim() : '';
      if (action === 'approve' || action === 'deny' || action === 'approve_run') {
        const outcome = {approve: 'allow_once', deny: 'reject_once',
          approve_run: 'allow_for_run'}[action];
        send({decisions: [entry(approval, outcome, reason)]}, errorSlot);
      } else if (action === 'deny_all') {
        const ids = JSON.parse(card.dataset.approvals);
        send({decisions: ids.map(id => entry(id, 'reject_once', reason))}, errorSlot);
      } else if (action === 'edit') {
        const value = parsed(editor, errorSlot);
        if (value === undefined) return;
        send({decisions: [entry(approval, 'allow_once', reason,
          {modified_arguments: value})]}, errorSlot);
      } else if (action === 'answer') {
        const value = parsed(editor, errorSlot);
        if (value === undefined) return;
        send({decisions: [entry(approval, 'allow_once', reason, {elicitation: value})]},
          errorSlot);
      } else if (action === 'completed') {
        const value = parsed(editor, errorSlot);
        if (value === undefined) return;
        resolve({tool_call_id: call, outcome: 'completed', result: value}, errorSlot);
      } else if (action === 'not_started') {
        resolve({tool_call_id: call, outcome: 'not_started'}, errorSlot);
      } else if (action === 'failed') {
        resolve({tool_call_id: call, outcome: 'failed',
          reason: reason || 'marked failed in the console'}, errorSlot);
      }
    });
  });
})();
"""
