// Drives Debian's headless Chromium through the approval console and the
// mail sink, as an approver in Europe/Berlin would: log in, page through
// the list, approve one reminder, reject another through its confirmation,
// approve a whole update, see the approved ones delivered and the rejected
// one cancelled, follow an escalation email's approve link from the sink,
// follow a digest member's link to its digest's page.
// Every page is checked with axe-core (no violations) and for sideways
// scrolling; the list, a reminder, the rejections' confirmations and the
// overview, with long data (the longest ids, a long subject, an unbroken
// word), at 1280, 1024 and 390 px: none scrolls sideways. Times read in
// the reader's zone, named as people say it (CET). A decision's POST is
// answered with a redirect, so a reload shows its result again without
// deciding again. The keyboard reaches the controls in order with a
// visible focus. Screenshots go to
// OUT_DIR. Run by console.TestConsoleInABrowser (make test-ui), which
// serves the console, schedules the reminders and passes their ids.
import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

const consoleURL = mustEnv('CONSOLE_URL');
const mailbox = mustEnv('MAILBOX_URL');
const key = mustEnv('APPROVER_KEY');
const approver = mustEnv('APPROVER');
const shipment = mustEnv('SHIPMENT_ID');
const approveId = mustEnv('APPROVE_ID');
const rejectId = mustEnv('REJECT_ID');
const wholeShipment = mustEnv('WHOLE_SHIPMENT_ID');
const linkId = mustEnv('LINK_ID');
const awaiting = Number(mustEnv('AWAITING'));
const longShipment = mustEnv('LONG_SHIPMENT_ID');
const longId = mustEnv('LONG_ID');
const digestMemberId = mustEnv('DIGEST_MEMBER_ID');
const outDir = process.env.OUT_DIR ?? 'out';
mkdirSync(outDir, { recursive: true });
const axePath = createRequire(import.meta.url).resolve('axe-core/axe.min.js');

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
const url = (path) => `${consoleURL}${path}`;

// heading waits for the page's heading name, and says what the page shows
// instead when it does not come.
async function heading(page, name) {
  try {
    await page.getByRole('heading', { name }).waitFor({ timeout: 15_000 });
  } catch (e) {
    throw new Error(`no heading "${name}" at ${page.url()}: the page says ${await text(page)}`, { cause: e });
  }
}

// accessible runs axe-core on the page: no violation of any rule; and the
// page does not scroll sideways.
async function accessible(page, what) {
  await fits(page, what);
  await page.addScriptTag({ path: axePath });
  const result = await page.evaluate(() => globalThis.axe.run(document));
  const found = result.violations.map((v) => `${v.id} (${v.impact}): ${v.help} at ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
  check(found.length === 0, `axe-core finds no violation on ${what}${found.length ? ':\n  ' + found.join('\n  ') : ''}`);
}

// fits checks that the page does not scroll sideways at its viewport.
async function fits(page, what) {
  const { scroll, width } = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, width: window.innerWidth }));
  check(scroll <= width, `${what} fits ${width} px without scrolling sideways (content ${scroll} px)`);
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
try {
  // bypassCSP lets the test inject axe-core; the console's own script is
  // allowed by its policy either way.
  const context = await browser.newContext({
    viewport: { width: 1280, height: 900 }, timezoneId: 'Europe/Berlin', locale: 'en-GB', bypassCSP: true,
  });
  const page = await context.newPage();
  const errors = [];
  // Every decision the browser posts: a reload must never add one.
  const posts = [];
  page.on('request', (req) => { if (req.method() === 'POST') posts.push(new URL(req.url()).pathname); });
  page.on('pageerror', (e) => errors.push(e.message));
  // A console error other than a status the test means to see (a 409 of a
  // used link, a favicon's 404) is the script's.
  page.on('console', (m) => {
    if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) errors.push(m.text());
  });

  // Log in.
  await page.goto(url('/console/'), { waitUntil: 'load' });
  check(new URL(page.url()).pathname === '/console/login', 'without a session the console asks to log in');
  await accessible(page, 'the login page');
  await page.getByLabel('Approver key').fill(key);
  await shot(page, 'console-login.png');
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.waitForURL(/\/console\/$/);
  check((await text(page)).includes(`Logged in as ${approver}`), 'the approver is logged in under her name');

  // The keyboard: the first Tab reaches the first link, with a focus ring.
  await page.keyboard.press('Tab');
  const focus = await page.evaluate(() => {
    const el = document.activeElement;
    const st = getComputedStyle(el);
    return { tag: el.tagName, text: el.textContent.trim(), outline: st.outlineStyle, width: parseFloat(st.outlineWidth) };
  });
  check(focus.tag === 'A' && focus.text.startsWith('shipnotify'), `Tab reaches the header's first link first (${focus.tag} ${focus.text})`);
  check(focus.outline !== 'none' && focus.width >= 2, `the focus is visible (${focus.outline} ${focus.width}px)`);

  // The list: a count, two rows a page, every reminder once.
  check((await text(page)).includes(`${awaiting} reminders match; this page shows 2, due first.`), `the list counts the ${awaiting} awaiting approval`);
  const firstTime = page.locator('table.reminders time').first();
  const shown = (await firstTime.textContent()).trim();
  const tooltip = await firstTime.getAttribute('title');
  check(/CES?T/.test(shown) && tooltip.endsWith(' UTC'), `times show in the reader's zone ("${shown}"), UTC in the tooltip ("${tooltip}")`);
  await accessible(page, 'the list');
  await shot(page, 'console-list.png');
  const ids = new Set();
  for (let n = 0; ; n++) {
    for (const id of await page.locator('table.reminders tbody tr').evaluateAll((rows) => rows.map((r) => r.dataset.reminderId))) ids.add(id);
    const next = page.getByRole('link', { name: 'Next 2' });
    if (await next.count() === 0) break;
    check(n < awaiting, 'the pages end');
    await next.click();
    await page.waitForLoadState('load');
    check(await page.getByRole('link', { name: 'First page' }).count() === 1, `page ${n + 2} links back to the first`);
  }
  check(ids.size === awaiting, `paging shows each of the ${awaiting} once (${ids.size})`);

  // Approve one, with a reason; the result says when it goes out.
  const byShipment = url(`/console/?shipment=${encodeURIComponent(shipment)}`);
  await page.goto(byShipment, { waitUntil: 'load' });
  const rows = page.locator('table.reminders tbody tr');
  check(await rows.count() === 2, `the list shows the 2 reminders of ${shipment} awaiting approval`);
  let row = page.locator(`tr[data-reminder-id="${approveId}"]`);
  check((await row.textContent()).includes('overdue'), 'a reminder past its due time is marked overdue');
  await row.getByPlaceholder('Reason (optional)').fill('customer confirmed');
  await row.getByRole('button', { name: `Approve ${approveId}` }).click();
  await heading(page, 'Approved');
  const approvedText = await text(page);
  check(approvedText.includes(approveId), `${approveId} is approved`);
  check(new URL(page.url()).pathname === '/console/decided', `the decision's POST redirects to its result (${page.url()})`);
  const postsBefore = posts.length;
  await page.reload({ waitUntil: 'load' });
  await heading(page, 'Approved');
  check(posts.length === postsBefore, 'reloading the result shows it again and posts nothing');
  check(/(goes out now \(it was due at|sent at) .*CES?T/.test(approvedText), 'the result says when it goes out, in local time');
  await accessible(page, 'the result page');
  await shot(page, 'console-approved.png');

  // Reject the other: a link to a confirmation that wants a reason.
  await page.goto(byShipment, { waitUntil: 'load' });
  check(await rows.count() === 1, 'only the undecided reminder is left on the list');
  row = page.locator(`tr[data-reminder-id="${rejectId}"]`);
  check(await row.getByRole('button', { name: /Reject/ }).count() === 0, 'no Reject button beside Approve');
  await row.getByRole('link', { name: `Reject ${rejectId}…` }).click();
  await heading(page, 'Reject this reminder?');
  await accessible(page, 'the reject confirmation');
  await shot(page, 'console-reject-confirm.png');
  await page.getByRole('button', { name: 'Reject reminder' }).click();
  check(new URL(page.url()).pathname === '/console/reject', 'without a reason the browser does not send the rejection');
  await page.getByLabel('Reason (required)').fill('wrong consignee');
  await page.getByRole('button', { name: 'Reject reminder' }).click();
  await heading(page, 'Rejected');
  await page.getByRole('link', { name: 'See its audit trail' }).click();
  await until(page, async () => (await page.textContent('dd.state')).trim() === 'cancelled', `${rejectId} is cancelled`);
  const rejected = page.locator('tr[data-event="rejected"]');
  check((await rejected.locator('td.by').textContent()).trim() === approver &&
    (await rejected.locator('td.reason').textContent()).trim() === 'wrong consignee', 'its audit trail says who rejected it and why');
  await accessible(page, 'the reminder page');
  await shot(page, 'console-rejected-trail.png');

  // Approve a whole update.
  await page.goto(url(`/console/?shipment=${encodeURIComponent(wholeShipment)}`), { waitUntil: 'load' });
  await page.getByRole('button', { name: 'Approve all 3' }).click();
  await heading(page, `Approved: update ${wholeShipment} / window-1`);
  check(await page.locator('table.outcomes tbody tr').count() === 3, 'approve all approved the update\'s 3');
  await shot(page, 'console-approved-all.png');

  // The overview: states and due days, drawn without a script.
  await page.goto(url('/console/overview'), { waitUntil: 'load' });
  check(await page.locator('table.state-bars').count() === 1 && await page.locator('div.due-chart').count() === 1, 'the overview draws its two charts');
  // The due chart reaches what is pending: the long update, due in 40 days.
  const dueNs = await page.locator('div.due-bar').evaluateAll((bars) => bars.map((b) => Number(b.dataset.n)));
  check(dueNs.some((n) => n >= 2) && dueNs.length <= 31, `the due chart's range covers the reminders due in 40 days (${dueNs.length} bars: ${dueNs.join(' ')})`);
  await accessible(page, 'the overview');
  await shot(page, 'console-overview.png');

  // A digest's member links to the digest's page, which lists its three.
  await page.goto(url(`/console/reminder?id=${encodeURIComponent(digestMemberId)}`), { waitUntil: 'load' });
  check((await page.textContent('dd.digest')).includes('in a digest every 1m'), 'a digest member says its interval');
  await page.getByRole('link', { name: 'sent in a digest of 3' }).click();
  await heading(page, /^Digest digest_/);
  check(await page.locator('table.digest-members tbody tr').count() === 3, 'the digest page lists its 3 members');
  check(await page.locator(`tr[data-reminder-id="${digestMemberId}"]`).count() === 1, 'the member is among them');
  const digestPath = new URL(page.url()).pathname;
  await accessible(page, 'the digest page');
  await shot(page, 'console-digest.png');

  // Long data at a desk's, a laptop's and a phone's width: nothing scrolls
  // sideways, the Decision column is in view, the header spans the page,
  // and every page stays accessible.
  const longList = `/console/?shipment=${encodeURIComponent(longShipment)}`;
  const longUpdate = `/console/reject?shipment_id=${encodeURIComponent(longShipment)}&update_id=${encodeURIComponent('delivery-window-' + 'x'.repeat(48))}`;
  for (const width of [1280, 1024, 390]) {
    await page.setViewportSize({ width, height: width === 390 ? 844 : 900 });
    for (const [path, name] of [[longList, { 1280: 'console-list-long.png', 390: 'console-list-390.png' }[width]],
      ['/console/?state=any', null],
      [`/console/reminder?id=${encodeURIComponent(longId)}`, width === 390 ? 'console-reminder-390.png' : null],
      [longUpdate, width === 1280 ? 'console-reject-update.png' : null],
      [`/console/reject?reminder_id=${encodeURIComponent(longId)}`, null],
      ['/console/overview', width === 390 ? 'console-overview-390.png' : null],
      [digestPath, width === 390 ? 'console-digest-390.png' : null]]) {
      await page.goto(url(path), { waitUntil: 'load' });
      await accessible(page, `${path} at ${width} px`);
      // No text too small to read: every label as large as 12 px.
      const smallest = await page.evaluate(() => Math.min(...[...document.querySelectorAll('main *')]
        .filter((el) => [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim()) && el.getClientRects().length)
        .map((el) => parseFloat(getComputedStyle(el).fontSize) * (el.closest('svg') ? el.closest('svg').getBoundingClientRect().width / el.closest('svg').viewBox.baseVal.width : 1))));
      check(smallest >= 12, `${path} at ${width} px has no text under 12 px (${smallest.toFixed(1)} px)`);
      if (name) await shot(page, name);
    }
    await page.goto(url(longList), { waitUntil: 'load' });
    const layout = await page.evaluate(() => {
      const th = [...document.querySelectorAll('table.reminders th')].find((h) => h.textContent.trim() === 'Decision');
      const button = document.querySelector('table.reminders button.approve');
      const header = document.querySelector('header').getBoundingClientRect();
      return { th: th ? th.getBoundingClientRect().right : -1, button: button.getBoundingClientRect().right, header: header.width, width: window.innerWidth };
    });
    // (On a phone the table is cards, its head hidden but for readers.)
    check(layout.button <= layout.width && (width < 1024 || layout.th <= layout.width),
      `at ${width} px the Decision column and its Approve button are in view (${layout.th}, ${layout.button})`);
    check(layout.header >= layout.width, `at ${width} px the header spans the page (${layout.header} px)`);
    // The message keeps its line breaks on the reminder's page.
    await page.goto(url(`/console/reminder?id=${encodeURIComponent(longId)}`), { waitUntil: 'load' });
    const text = await page.locator('dd.text').innerText();
    check(text.startsWith('Dear consignee,\n\nthe tracking reference'), `the reminder page keeps the message's line breaks (${JSON.stringify(text.slice(0, 40))})`);
  }
  await page.setViewportSize({ width: 1280, height: 900 });

  // The approved ones reach the mail sink; the rejected one does not.
  await page.goto(mailbox, { waitUntil: 'domcontentloaded' });
  const delivered = page.locator(`article[data-purpose="reminder"][data-reminder-id="${approveId}"]`);
  await until(page, async () => await delivered.count() === 1, `${approveId} is delivered`);
  check(await page.locator(`article[data-purpose="reminder"][data-reminder-id="${rejectId}"]`).count() === 0,
    'the rejected one was not delivered');

  // Follow the escalation email's approve link from the sink.
  const escalation = page.locator(`article[data-purpose="escalation"][data-reminder-id="${linkId}"]`);
  check(await escalation.count() === 1, `the escalation for ${linkId} is in the sink`);
  check((await escalation.textContent()).includes('Reject:'), 'it carries a reject link too');
  // Opened as a mail client would: the link's address, in the browser.
  const approveLink = await escalation.locator('a', { hasText: '/console/link/' }).first().getAttribute('href');
  await page.goto(approveLink, { waitUntil: 'load' });
  await heading(page, 'Approve this reminder?');
  check((await text(page)).includes(linkId), 'the confirmation page names the reminder');
  await accessible(page, 'the link confirmation');
  await shot(page, 'link-confirm.png');
  await page.getByLabel('Reason (optional)').fill('approved from the email');
  await page.getByRole('button', { name: 'Approve reminder' }).click();
  await heading(page, 'Approved');

  // Opening the used link again changes nothing and says so.
  await page.goBack({ waitUntil: 'domcontentloaded' });
  await page.reload({ waitUntil: 'domcontentloaded' });
  await heading(page, 'Nothing left to do');
  check((await text(page)).includes('It was approved at '), 'a used link says what was decided and when (not who: that is for the console)');

  await page.goto(mailbox, { waitUntil: 'domcontentloaded' });
  const linkDelivered = page.locator(`article[data-purpose="reminder"][data-reminder-id="${linkId}"]`);
  await until(page, async () => await linkDelivered.count() === 1, `${linkId}, approved by link, is delivered`);
  check(errors.length === 0, `no script error on any page${errors.length ? ': ' + errors.join('; ') : ''}`);
} finally {
  await browser.close();
}
