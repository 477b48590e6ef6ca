// The console's one script, and the pages work without it: it tells the
// server the reader's time zone (a cookie the next page is written with;
// without it times are in UTC, and the footer says so) and gives
// shortened hashes a copy button.
'use strict';

const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
if (zone && !document.cookie.split('; ').includes('shipnotify_tz=' + zone)) {
  // A preference, not a credential: a year, the console's pages only.
  document.cookie = `shipnotify_tz=${zone}; path=/console/; max-age=31536000; samesite=strict`;
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
