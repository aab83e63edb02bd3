// The console's own small script (no framework, nothing loaded from elsewhere):
// 1. <time datetime> elements show, on hover, the viewer's local time and how long ago it was.
// 2. Live refresh: the element with data-live-url polls that JSON endpoint every
//    data-live-interval ms. When the answer's "stamp" changes, every [data-live-region] element
//    is replaced by its copy in a fresh fetch of the page (no reload, scroll kept). Polling stops
//    once "in_flight" is false, and the pause button stops and restarts it.
(function () {
  "use strict";

  function ago(date) {
    var s = Math.round((Date.now() - date.getTime()) / 1000), future = s < 0;
    s = Math.abs(s);
    var text = s < 60 ? s + " s" : s < 3600 ? Math.round(s / 60) + " min" :
      s < 172800 ? (s / 3600).toFixed(1) + " h" : Math.round(s / 86400) + " d";
    return future ? "in " + text : text + " ago";
  }

  function decorateTimes(root) {
    root.querySelectorAll("time[datetime]").forEach(function (el) {
      if (el.dataset.vfTime) return;
      el.dataset.vfTime = "1";
      el.addEventListener("mouseenter", function () {
        var date = new Date(el.getAttribute("datetime"));
        if (isNaN(date.getTime())) return;
        var local = date.toLocaleString(undefined, {
          year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit",
          minute: "2-digit", second: "2-digit", fractionalSecondDigits: 3, timeZoneName: "short"
        });
        el.title = local + " (your time) · " + ago(date);
      });
    });
  }

  function live(box) {
    var url = box.dataset.liveUrl, every = Number(box.dataset.liveInterval) || 3000;
    var stamp = box.dataset.liveStamp || null, timer = null, paused = false;
    var button = box.querySelector("[data-live-toggle]");
    var state = box.querySelector("[data-live-state]");

    function say(text, status) {
      state.textContent = text;
      box.dataset.liveStatus = status;
    }
    function count(name) {
      box.dataset[name] = String(Number(box.dataset[name] || 0) + 1);
    }
    function busy() {
      // The operator is ticking rows or typing: do not swap the page under them.
      var active = document.activeElement;
      return document.querySelector("input.action-select:checked") ||
        (active && /^(INPUT|TEXTAREA|SELECT)$/.test(active.tagName) && active.type !== "submit");
    }
    function refresh() {
      return fetch(window.location.href, { credentials: "same-origin" })
        .then(function (r) { return r.text(); })
        .then(function (html) {
          var fresh = new DOMParser().parseFromString(html, "text/html");
          document.querySelectorAll("[data-live-region]").forEach(function (old) {
            var next = fresh.getElementById(old.id);
            if (!next) return;
            var open = {};  // keep the step details the operator opened
            old.querySelectorAll("details[id][open]").forEach(function (d) { open[d.id] = true; });
            next = document.adoptNode(next);
            next.querySelectorAll("details[id]").forEach(function (d) { if (open[d.id]) d.open = true; });
            old.replaceWith(next);
            decorateTimes(next);
          });
          count("liveRefreshes");
        });
    }
    function stop(text) {
      say(text, "stopped");
      button.hidden = true;
    }
    function poll() {
      timer = null;
      var sep = url.indexOf("?") < 0 ? "?" : "&";
      fetch(url + sep + "_=" + Date.now(), {
        credentials: "same-origin", headers: { Accept: "application/json" }
      })
        .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
        .then(function (data) {
          count("livePolls");
          var changed = stamp !== null && data.stamp !== stamp;
          var done = changed && !busy() ? refresh() : Promise.resolve();
          if (!changed || !busy()) stamp = data.stamp;
          return done.then(function () {
            if (paused) return;
            if (data.in_flight) {
              say("live: refreshing every " + every / 1000 + " s", "live");
              timer = window.setTimeout(poll, every);
            } else {
              stop("nothing in flight: live refresh stopped");
            }
          });
        })
        .catch(function (status) {
          if (paused) return;
          say("refresh failed (" + status + "), trying again", "error");
          timer = window.setTimeout(poll, every * 3);
        });
    }

    button.addEventListener("click", function () {
      paused = !paused;
      if (paused) {
        window.clearTimeout(timer);
        timer = null;
        say("paused", "paused");
        button.textContent = "Resume live refresh";
      } else {
        button.textContent = "Pause live refresh";
        poll();
      }
    });
    if (box.dataset.liveInFlight === "false") {
      stop("nothing in flight");
      return;
    }
    say("live: refreshing every " + every / 1000 + " s", "live");
    timer = window.setTimeout(poll, every);
  }

  function start() {
    decorateTimes(document);
    document.querySelectorAll("[data-live-url]").forEach(live);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
