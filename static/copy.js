// copy.js: a button with data-copy="<selector>" copies that element's text
// to the clipboard and says so in #copy-status (a polite live region). The
// button is hidden in the HTML and shown only here, so without JavaScript
// (or without a clipboard) the page offers the text to select instead.
(function () {
  "use strict";
  document.querySelectorAll("button[data-copy]").forEach(function (button) {
    const source = document.querySelector(button.dataset.copy);
    const status = document.getElementById("copy-status");
    if (!source || !navigator.clipboard) return;
    button.hidden = false;
    button.addEventListener("click", function () {
      navigator.clipboard.writeText(source.textContent.trim()).then(function () {
        if (status) status.textContent = "Copied to the clipboard.";
      }, function () {
        // Refused (no permission): select it for the person to copy.
        const range = document.createRange();
        range.selectNodeContents(source);
        const sel = window.getSelection();
        sel.removeAllRanges();
        sel.addRange(range);
        if (status) status.textContent = "Could not copy: the token is selected, press Ctrl+C or ⌘C.";
      });
    });
  });
})();
