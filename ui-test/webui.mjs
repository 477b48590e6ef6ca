// Drives Debian's headless Chromium to the Temporal Web UI, filters the
// workflow list by ShipmentId and checks that the reminder appears with its
// search attributes, its summary and details (ids and the due time, no
// personal data) and its current details (what it waits for), all decoded
// through the codec server. Screenshots go to OUT_DIR. Run by
// scripts/test-ui.sh.
import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

// The dev server's Web UI (scripts/dev.sh env), on whatever port it has.
const ui = process.env.UI_URL ?? process.env.SHIPNOTIFY_DEV_UI_URL ?? 'http://localhost:8233';
const namespace = process.env.TEMPORAL_NAMESPACE ?? 'default';
const shipment = mustEnv('SHIPMENT_ID');
const workflowId = mustEnv('WORKFLOW_ID');
// The due time at start, as the summary and details print it, and the due
// time a reschedule moved it to, as the current details print it.
const dueText = mustEnv('DUE_TEXT');
const movedDueText = mustEnv('MOVED_DUE_TEXT');
// What the update carried that must never show: the address and the message.
const personal = (process.env.PERSONAL ?? '').split('|').filter(Boolean);
const outDir = process.env.OUT_DIR ?? 'out';
mkdirSync(outDir, { recursive: true });

function mustEnv(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is required`);
  return v;
}

// The Web UI renders the summary, details and current details (Temporal
// markdown) in iframes of their own; this is the text of every frame.
async function framesText(page) {
  const texts = [];
  for (const frame of page.frames()) {
    if (frame === page.mainFrame()) continue;
    texts.push(((await frame.textContent('body').catch(() => '')) ?? '').replace(/\s+/g, ' ').trim());
  }
  return texts;
}

// waitForFrames polls the frames until want(texts) holds or 30 s pass.
async function waitForFrames(page, want) {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const texts = await framesText(page);
    if (want(texts) || Date.now() > deadline) return texts;
    await page.waitForTimeout(250);
  }
}

// fitsItsBox says whether the frame whose text includes marker shows all of
// it: its content ends above the bottom of the frame and of every ancestor
// that clips (the UI gives the details a box a few lines high).
async function fitsItsBox(page, marker) {
  for (const el of await page.$$('iframe')) {
    const frame = await el.contentFrame();
    const text = (await frame?.textContent('body').catch(() => '')) ?? '';
    if (!text.includes(marker)) continue;
    const contentBottom = await frame.evaluate(() => {
      const r = document.createRange();
      r.selectNodeContents(document.body);
      return r.getBoundingClientRect().bottom;
    });
    return el.evaluate((iframe, contentBottom) => {
      const top = iframe.getBoundingClientRect().top;
      let visibleBottom = iframe.getBoundingClientRect().bottom;
      for (let a = iframe.parentElement; a; a = a.parentElement) {
        const style = getComputedStyle(a);
        if (style.overflowY !== 'visible') visibleBottom = Math.min(visibleBottom, a.getBoundingClientRect().bottom);
      }
      return top + contentBottom <= visibleBottom + 1;
    }, contentBottom);
  }
  return false;
}

function check(cond, msg) {
  if (!cond) throw new Error(`UI check failed: ${msg}`);
  console.log(`ok: ${msg}`);
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
try {
  const page = await browser.newPage({ viewport: { width: 1440, height: 1000 } });
  const query = `ShipmentId="${shipment}"`;
  const listURL = `${ui}/namespaces/${namespace}/workflows?query=${encodeURIComponent(query)}`;
  await page.goto(listURL, { waitUntil: 'domcontentloaded' });
  const link = page.getByText(workflowId, { exact: true }).first();
  await link.waitFor({ timeout: 30_000 });
  check(true, `the list filtered by ${query} shows ${workflowId}`);
  await page.screenshot({ path: join(outDir, 'ui-workflow-list.png'), fullPage: true });

  await link.click();
  await page.waitForURL(/\/workflows\/.+/, { timeout: 30_000 });
  // The input is encrypted in the history; the UI shows it decoded through
  // shipnotify's codec server.
  await page.getByText('"ReminderID"').first().waitFor({ timeout: 30_000 });
  const input = (await page.textContent('main')).replace(/\s+/g, ' ');
  check(input.includes(`"ShipmentID": "${shipment}"`), 'the workflow input is shown decoded by the codec server');
  check(!input.includes('binary/encrypted'), 'no encrypted payload is left on the page');
  await page.screenshot({ path: join(outDir, 'ui-workflow-decoded.png'), fullPage: true });
  // The custom search attributes have their own tab on the workflow's page.
  await page.getByText('Search Attributes', { exact: true }).first().click();
  await page.waitForURL(/\/search-attributes$/, { timeout: 30_000 });
  await page.getByText('indexedFields').first().waitFor({ timeout: 30_000 });
  const shown = (await page.textContent('main')).replace(/\s+/g, ' ');
  for (const [name, value] of [['ShipmentId', shipment], ['UpdateId', 'window-1'], ['ReminderState', 'scheduled'], ['DueAt', '']]) {
    const want = value ? `"${name}": "${value}"` : `"${name}":`;
    check(shown.includes(want), `the workflow shows search attribute ${want}`);
  }
  await page.screenshot({ path: join(outDir, 'ui-search-attributes.png'), fullPage: true });

  // The summary and details set at start, and the current details the
  // workflow keeps (the UI asks a worker through the metadata query): all
  // three are encrypted payloads the UI decodes through the codec server.
  await page.getByText('User Metadata', { exact: true }).first().click();
  await page.waitForURL(/\/user-metadata$/, { timeout: 30_000 });
  const reminderId = workflowId.replace(/^reminder\//, '');
  const summary = `Reminder ${reminderId} due ${dueText}`;
  const sleeping = `Sleeping until due at ${movedDueText}`;
  const texts = await waitForFrames(page, (ts) => ts.includes(summary) && ts.includes(sleeping));
  check(texts.includes(summary), `the summary reads "${summary}"`);
  const details = texts.find((t) => t.includes('Shipment:')) ?? '';
  for (const want of [`Shipment: ${shipment}`, 'Update: window-1', 'Subscriber: ops',
    `Due at start: ${dueText} (start delay: no Current Details until then)`, 'Approval: not required']) {
    check(details.includes(want), `the details say "${want}"`);
  }
  check(texts.includes(sleeping), `the current details read "${sleeping}"`);
  check(await fitsItsBox(page, 'Shipment:'), 'the details fit their box: no line is cut off');
  const metadataPage = [...texts, (await page.textContent('main')) ?? ''].join('\n');
  check(!metadataPage.includes('binary/encrypted'), 'nothing encrypted is left on the page');
  for (const p of personal) {
    check(!metadataPage.includes(p), `"${p}" (personal data or message text) is not shown`);
  }
  await page.screenshot({ path: join(outDir, 'ui-user-metadata.png'), fullPage: true });
} finally {
  await browser.close();
}
