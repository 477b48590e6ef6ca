// Drives Debian's headless Chromium through the approval console and the
// mail sink: log in, approve one reminder and reject another, see the
// approved one delivered and the rejected one cancelled, then follow an
// escalation email's approve link from the sink to its confirmation page
// and approve there. Screenshots go to OUT_DIR. Run by
// console.TestConsoleInABrowser (make test-ui), which serves the console,
// schedules the reminders and passes their ids.
import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

const consoleURL = mustEnv('CONSOLE_URL');
const mailbox = mustEnv('MAILBOX_URL');
const key = mustEnv('APPROVER_KEY');
const shipment = mustEnv('SHIPMENT_ID');
const approveId = mustEnv('APPROVE_ID');
const rejectId = mustEnv('REJECT_ID');
const linkId = mustEnv('LINK_ID');
const outDir = process.env.OUT_DIR ?? 'out';
mkdirSync(outDir, { recursive: true });

function mustEnv(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is required`);
  return v;
}

function check(cond, msg) {
  if (!cond) throw new Error(`console check failed: ${msg}`);
  console.log(`ok: ${msg}`);
}

// until reloads the page until cond holds, for at most timeoutMs: the
// worker delivers and records on its own time.
async function until(page, cond, what, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await cond()) { console.log(`ok: ${what}`); return; }
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await page.waitForTimeout(250);
    await page.reload({ waitUntil: 'domcontentloaded' });
  }
}

const text = async (page) => (await page.textContent('body')).replace(/\s+/g, ' ');
const shot = (page, name) => page.screenshot({ path: join(outDir, name), fullPage: true });

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });

  // Log in.
  await page.goto(`${consoleURL}/console/`, { waitUntil: 'domcontentloaded' });
  check(new URL(page.url()).pathname === '/console/login', 'without a session the console asks to log in');
  await page.getByLabel('Approver key').fill(key);
  await shot(page, 'console-login.png');
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.waitForURL(/\/console\/$/);
  check((await text(page)).includes('Logged in as alice'), 'the approver is logged in under her name');

  // The list shows both reminders awaiting approval.
  await page.goto(`${consoleURL}/console/?shipment=${encodeURIComponent(shipment)}`, { waitUntil: 'domcontentloaded' });
  const rows = page.locator('table.reminders tbody tr');
  check(await rows.count() === 2, `the list shows the 2 reminders of ${shipment} awaiting approval`);
  await shot(page, 'console-list.png');

  // Approve one, with a reason.
  let row = page.locator(`tr[data-reminder-id="${approveId}"]`);
  await row.getByPlaceholder('Reason (optional)').fill('customer confirmed');
  await row.getByRole('button', { name: 'Approve' }).click();
  await page.getByRole('heading', { name: 'Approved' }).waitFor();
  check((await text(page)).includes(approveId), `${approveId} is approved`);
  await shot(page, 'console-approved.png');

  // Reject the other.
  await page.goto(`${consoleURL}/console/?shipment=${encodeURIComponent(shipment)}`, { waitUntil: 'domcontentloaded' });
  check(await rows.count() === 1, 'only the undecided reminder is left on the list');
  row = page.locator(`tr[data-reminder-id="${rejectId}"]`);
  await row.getByPlaceholder('Reason (optional)').fill('wrong consignee');
  await row.getByRole('button', { name: 'Reject' }).click();
  await page.getByRole('heading', { name: 'Rejected' }).waitFor();
  await page.getByRole('link', { name: 'See its audit trail' }).click();
  await until(page, async () => (await page.textContent('dd.state')).trim() === 'cancelled', `${rejectId} is cancelled`);
  const trail = await text(page);
  check(trail.includes('rejected alice wrong consignee'), 'its audit trail says who rejected it and why');
  await shot(page, 'console-rejected-trail.png');

  // The approved one reaches the mail sink.
  await page.goto(mailbox, { waitUntil: 'domcontentloaded' });
  const delivered = page.locator(`article[data-purpose="reminder"][data-reminder-id="${approveId}"]`);
  await until(page, async () => await delivered.count() === 1, `${approveId} is delivered`);
  check(await page.locator(`article[data-purpose="reminder"][data-reminder-id="${rejectId}"]`).count() === 0,
    'the rejected one was not delivered');
  await shot(page, 'mailbox-delivered.png');

  // Follow the escalation email's approve link from the sink.
  const escalation = page.locator(`article[data-purpose="escalation"][data-reminder-id="${linkId}"]`);
  check(await escalation.count() === 1, `the escalation for ${linkId} is in the sink`);
  check((await escalation.textContent()).includes('Reject:'), 'it carries a reject link too');
  await escalation.locator('a', { hasText: '/console/link/' }).first().click();
  await page.getByRole('heading', { name: 'Approve this reminder?' }).waitFor();
  check((await text(page)).includes(linkId), 'the confirmation page names the reminder');
  await shot(page, 'link-confirm.png');
  await page.getByLabel('Reason (optional)').fill('approved from the email');
  await page.getByRole('button', { name: 'Approve reminder' }).click();
  await page.getByRole('heading', { name: 'Approved' }).waitFor();
  await shot(page, 'link-approved.png');

  // Opening the used link again changes nothing and says so.
  await page.goBack({ waitUntil: 'domcontentloaded' });
  await page.reload({ waitUntil: 'domcontentloaded' });
  await page.getByRole('heading', { name: 'Nothing left to do' }).waitFor();
  check((await text(page)).includes('approved by escalation-link'), 'a used link says who decided');
  await shot(page, 'link-used.png');

  await page.goto(mailbox, { waitUntil: 'domcontentloaded' });
  const linkDelivered = page.locator(`article[data-purpose="reminder"][data-reminder-id="${linkId}"]`);
  await until(page, async () => await linkDelivered.count() === 1, `${linkId}, approved by link, is delivered`);
  await shot(page, 'mailbox-link-delivered.png');
} finally {
  await browser.close();
}
