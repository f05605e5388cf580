// The admin pages' actions: the event page's (re-drive, replay), the pauses page's (pause, resume), the bulk re-drive of a search or a failure group and resolving a group; served from the admin itself (the pages' CSP
// allows no inline script). Each form posts JSON to the admin API, the same protected routes
// scripts use (Content-Type: application/json, same origin: the CSRF guard lets it through).
// A replay is previewed first: its "Replay" button stays disabled until a dry run of the same
// choice has been shown.
'use strict';

function show(form, text, ok) {
  const out = form.querySelector('.result');
  out.textContent = text;
  out.className = `result ${ok ? 'ok' : 'refused'}`;
}

function choice(form) {
  const steps = [...form.querySelectorAll('input[name="step"]:checked')].map((box) => box.value);
  const all = form.querySelector('input[name="all_steps"]')?.checked === true;
  return { steps, all };
}

async function post(url, body) {
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const json = await response.json().catch(() => ({}));
  return { ok: response.ok, json };
}

function describePlan(plan) {
  const lines = [`Plan: generation ${plan.generation} -> ${plan.nextGeneration} of handler "${plan.handler}" (now ${plan.fromState})`];
  for (const step of plan.rerun) lines.push(`  run again: ${step.name} (${step.kind ?? 'kind unknown'})${step.idempotencyKey ? `, new key ${step.idempotencyKey}` : ''}`);
  for (const step of plan.reuse) lines.push(`  reuse: ${step.name} (its recorded result, no new effect)`);
  if (plan.localRerun.length > 0) lines.push(`  local writes done again: ${plan.localRerun.join(', ')}`);
  return lines.join('\n');
}

for (const form of document.querySelectorAll('form.replay')) {
  const replayButton = form.querySelector('button[value="replay"]');
  let previewed = null;
  const reset = () => {
    previewed = null;
    replayButton.disabled = true;
  };
  // A different choice of steps needs its own preview; the reason does not.
  form.addEventListener('change', (event) => {
    if (event.target.name !== 'reason') reset();
  });
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const action = event.submitter?.value;
    const { steps, all } = choice(form);
    const reason = form.querySelector('input[name="reason"]').value.trim();
    const body = { handler: form.dataset.handler, ...(all ? { all_steps: true } : { steps }) };
    if (!all && steps.length === 0) return show(form, 'Choose the steps to run again (or all steps).', false);
    if (action === 'preview') {
      const { ok, json } = await post(form.dataset.url, { ...body, dry_run: true });
      if (!ok) return show(form, `Refused: ${json.reason ?? json.message ?? 'unknown error'}`, false);
      previewed = JSON.stringify(body);
      replayButton.disabled = false;
      return show(form, describePlan(json.plan), true);
    }
    if (previewed !== JSON.stringify(body)) return show(form, 'Preview this choice first (dry run).', false);
    if (!reason) return show(form, 'Say why (the reason is recorded with the event).', false);
    const { ok, json } = await post(form.dataset.url, { ...body, reason });
    if (!ok) return show(form, `Refused: ${json.reason ?? json.message ?? 'unknown error'}`, false);
    show(form, `Replayed: generation ${json.plan.nextGeneration} of "${json.plan.handler}" is queued. Reloading...`, true);
    setTimeout(() => location.reload(), 1200);
  });
}

for (const form of document.querySelectorAll('form.redrive')) {
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const reason = form.querySelector('input[name="reason"]').value.trim();
    if (!reason) return show(form, 'Say why (the reason is recorded with the event).', false);
    const body = { reason, ...(form.dataset.handler ? { handler: form.dataset.handler } : {}) };
    const { ok, json } = await post(form.dataset.url, body);
    if (!ok) return show(form, `Refused: ${json.reason ?? json.message ?? 'unknown error'}`, false);
    const moved = (json.runs ?? []).map((run) => `"${run.handler}" ${run.fromState} -> received`).join(', ');
    show(form, `Re-driven: ${moved || 'dispatch queued'} (same generation, same keys). Reloading...`, true);
    setTimeout(() => location.reload(), 1200);
  });
}

for (const form of document.querySelectorAll('form.pause-action')) {
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const reason = form.querySelector('input[name="reason"]').value.trim();
    const scope = form.dataset.scope ?? form.querySelector('select[name="scope"]').value;
    const name = form.dataset.name ?? form.querySelector('input[name="name"]').value.trim();
    if (!name) return show(form, 'Name the handler or source.', false);
    if (!reason) return show(form, 'Say why (the reason is recorded).', false);
    const now = form.querySelector('input[name="now"]')?.checked === true;
    const { ok, json } = await post(form.dataset.url, { scope, name, reason, ...(now ? { now: true } : {}) });
    if (!ok) return show(form, `Refused: ${json.reason ?? json.message ?? 'unknown error'}`, false);
    show(form, json.released === undefined ? `Paused ${scope} "${name}". Reloading...` : `Resumed ${scope} "${name}": ${json.released} waiting run(s) enqueued. Reloading...`, true);
    setTimeout(() => location.reload(), 1200);
  });
}

// Re-drive all the events a search (or a failure group) matches: the preview says how many and
// which, and only then is "Re-drive all" enabled, for exactly that search.
for (const form of document.querySelectorAll('form.bulk')) {
  const redriveButton = form.querySelector('button[value="redrive"]');
  const search = JSON.parse(form.dataset.search);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const reason = form.querySelector('input[name="reason"]').value.trim();
    if (event.submitter?.value === 'preview') {
      const { ok, json } = await post(form.dataset.url, { ...search, dry_run: true });
      if (!ok) return show(form, `Refused: ${json.message ?? json.reason ?? 'unknown error'}`, false);
      redriveButton.disabled = json.matched === 0;
      const rows = json.results.map((r) => r.rowId);
      return show(form, `${json.matched} event(s) would be re-driven${rows.length ? `: rows ${rows.slice(0, 20).join(', ')}${rows.length > 20 ? ', ...' : ''}` : ''}. Nothing changed yet.`, true);
    }
    if (!reason) return show(form, 'Say why (the reason is recorded with each event).', false);
    const { ok, json } = await post(form.dataset.url, { ...search, dry_run: false, reason });
    if (!ok) return show(form, `Refused: ${json.message ?? json.reason ?? 'unknown error'}`, false);
    const done = json.results.filter((r) => r.ok).length;
    show(form, `Re-driven: ${done} of ${json.matched} event(s) (same generation, same keys)${done < json.matched ? '; the rest changed meanwhile' : ''}. Reloading...`, true);
    redriveButton.disabled = true;
    setTimeout(() => location.reload(), 1500);
  });
}

for (const form of document.querySelectorAll('form.resolve')) {
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const reason = form.querySelector('input[name="reason"]').value.trim();
    if (!reason) return show(form, 'Say why (the reason is recorded with the group).', false);
    const { ok, json } = await post(form.dataset.url, { reason });
    if (!ok) return show(form, `Refused: ${json.reason ?? json.message ?? 'unknown error'}`, false);
    show(form, 'Resolved: hidden until one of its runs fails again. Reloading...', true);
    setTimeout(() => location.reload(), 1200);
  });
}
