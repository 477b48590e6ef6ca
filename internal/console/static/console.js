// The console's one script, and the pages work without it: it shows each
// time in the reader's own zone (the UTC time the page was written with
// stays as the tooltip) and gives shortened hashes a copy button.
'use strict';

const local = new Intl.DateTimeFormat(undefined, {
  day: 'numeric', month: 'short', year: 'numeric',
  hour: '2-digit', minute: '2-digit', timeZoneName: 'short',
});

for (const el of document.querySelectorAll('time[datetime]')) {
  const at = new Date(el.dateTime);
  if (Number.isNaN(at.getTime())) continue;
  el.title = el.textContent.trim();
  el.textContent = local.format(at);
  el.classList.add('local');
}

for (const el of document.querySelectorAll('[data-copy]')) {
  if (!navigator.clipboard) break;
  const button = document.createElement('button');
  button.type = 'button';
  button.className = 'copy';
  button.textContent = 'Copy';
  button.setAttribute('aria-label', 'Copy ' + el.dataset.copy);
  button.addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText(el.dataset.copy);
      button.textContent = 'Copied';
    } catch {
      button.textContent = 'Copy failed';
    }
  });
  el.after(button);
}
