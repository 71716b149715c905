// The inspector's only script: live updates (poll a small JSON version, swap the page's live part
// when it moves), the "show the original" panels (fetched on first open, shown as text), and the
// "only what is sent" switch. Every request goes to this server; nothing is cached in the page.
(function () {
  "use strict";
  var live = document.getElementById("live");
  var status = document.getElementById("live-status");

  function bind(root) {
    root.querySelectorAll("details.orig").forEach(function (d) {
      d.addEventListener("toggle", function () {
        var pre = d.querySelector("pre");
        if (!d.open || pre.dataset.loaded) { return; }
        pre.textContent = "loading…";
        fetch(d.dataset.src, {credentials: "same-origin"}).then(function (r) {
          return r.json().then(function (body) { return {ok: r.ok, body: body}; });
        }).then(function (res) {
          pre.textContent = res.ok ? res.body.text : (res.body.error || "not found");
          pre.dataset.loaded = "1";
        }).catch(function () { pre.textContent = "the server did not answer"; });
      });
    });
    var box = root.querySelector("#sent-only");
    if (box) {
      box.checked = document.body.classList.contains("sent-only");
      box.addEventListener("change", function () { document.body.classList.toggle("sent-only", box.checked); });
    }
  }

  function swap(html) {
    var open = {};
    live.querySelectorAll("details[data-key]").forEach(function (d) {
      if (d.open) { open[d.dataset.key] = d.querySelector("pre").textContent; }
    });
    live.innerHTML = html;
    live.querySelectorAll("details[data-key]").forEach(function (d) {
      if (Object.prototype.hasOwnProperty.call(open, d.dataset.key)) {
        d.open = true;
        var pre = d.querySelector("pre");
        pre.textContent = open[d.dataset.key];
        pre.dataset.loaded = "1";
      }
    });
    bind(live);
  }

  function poll() {
    fetch(live.dataset.version, {credentials: "same-origin", cache: "no-store"}).then(function (r) {
      if (!r.ok) { throw new Error(String(r.status)); }
      return r.json();
    }).then(function (v) {
      var now = String(v.version);
      if (now === live.dataset.current) { status.textContent = "live"; return null; }
      return fetch(live.dataset.fragment, {credentials: "same-origin", cache: "no-store"}).then(function (r) {
        return r.text();
      }).then(function (html) {
        live.dataset.current = now;
        swap(html);
        status.textContent = "live · updated " + new Date().toLocaleTimeString();
      });
    }).catch(function () { status.textContent = "live: the server did not answer, retrying"; })
      .then(function () { window.setTimeout(poll, Number(live.dataset.every || 1500)); });
  }

  bind(document);
  if (live && live.dataset.version) { window.setTimeout(poll, Number(live.dataset.every || 1500)); }
}());
