// Drives Debian's headless Chromium to the Temporal Web UI, filters the
// workflow list by ShipmentId and checks that the reminder appears with its
// search attributes. Screenshots go to OUT_DIR. Run by scripts/test-ui.sh.
import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

const ui = process.env.UI_URL ?? 'http://localhost:8233';
const namespace = process.env.TEMPORAL_NAMESPACE ?? 'default';
const shipment = mustEnv('SHIPMENT_ID');
const workflowId = mustEnv('WORKFLOW_ID');
const outDir = process.env.OUT_DIR ?? 'out';
mkdirSync(outDir, { recursive: true });

function mustEnv(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is required`);
  return v;
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
} finally {
  await browser.close();
}
