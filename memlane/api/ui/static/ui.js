// memlane inspector: small progressive enhancement; every page works without it.
"use strict";
document.addEventListener("submit", (event) => {
  // buttons with data-confirm ask before a change that takes a memory out of contexts
  const button = event.submitter;
  const question = button && button.getAttribute("data-confirm");
  if (question && !window.confirm(question)) {
    event.preventDefault();
  }
});
document.addEventListener("DOMContentLoaded", () => {
  // a "where is" answer or a #c-… link scrolls its candidate into view
  const found = document.querySelector("tr.found") ||
    (location.hash.startsWith("#c-") && document.getElementById(location.hash.slice(1)));
  if (found) {
    found.scrollIntoView({ block: "center" });
  }
});
