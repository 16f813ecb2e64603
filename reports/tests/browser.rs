//! The report as a person sees it: headless Chromium opens the page, every image loads with a
//! real size, nothing is logged, and a screenshot is taken.
//!
//! Needs Debian's `chromium` (`apt-get install -y chromium`; `cargo xtask test` installs it). When
//! it is missing this test fails and says so: a report nobody looked at is not tested.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;

use std::os::unix::process::CommandExt as _;

use reports::TextBox;

// Each test binary compiles all the shared support and uses part of it.
#[allow(dead_code)]
mod support;

const TIMEOUT: Duration = Duration::from_secs(90);
const POLL: Duration = Duration::from_millis(50);

fn chromium() -> PathBuf {
    let on_path = std::env::var_os("PATH")
        .and_then(|p| std::env::split_paths(&p).map(|d| d.join("chromium")).find(|c| c.is_file()));
    let found = on_path.or_else(|| Some(PathBuf::from("/usr/bin/chromium")).filter(|p| p.is_file()));
    found.unwrap_or_else(|| {
        panic!(
            "Debian's chromium is not installed, so the report cannot be checked in a browser: install it with \
             `apt-get install -y chromium` (cargo xtask test installs it)"
        )
    })
}

struct Run {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

/// Runs headless Chromium with a fresh profile, killing its whole process group on timeout.
fn run_chromium(work: &Path, name: &str, args: &[String]) -> Run {
    let profile = work.join(format!("{name}-profile"));
    std::fs::create_dir_all(&profile).unwrap();
    let (out_path, err_path) = (work.join(format!("{name}.stdout")), work.join(format!("{name}.stderr")));
    let mut child = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .stdin(Stdio::null())
        .stdout(File::create(&out_path).unwrap())
        .stderr(File::create(&err_path).unwrap())
        // Its own process group, so a timeout can end chromium and every helper it started.
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start chromium: {e}"));
    let pgid = child.id();
    let kill_group = || {
        let _ = Command::new("kill").args(["-KILL", "--", &format!("-{pgid}")]).stderr(Stdio::null()).status();
    };
    let mut waited = Duration::ZERO;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if waited >= TIMEOUT {
            kill_group();
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "chromium ({name}) did not finish within {TIMEOUT:?} and was killed; stderr:\n{}",
                std::fs::read_to_string(&err_path).unwrap_or_default()
            );
        }
        std::thread::sleep(POLL);
        waited += POLL;
    };
    // Helpers (zygote, GPU process) normally exit with it; make sure none outlives the test.
    kill_group();
    Run {
        status,
        stdout: std::fs::read_to_string(&out_path).unwrap_or_default(),
        stderr: std::fs::read_to_string(&err_path).unwrap_or_default(),
    }
}

/// A test-only copy of the page that records into the DOM, for `--dump-dom` to print: every
/// image's natural size and where it is shown, every error event (scripts and failed loads),
/// and the box of every piece of text the page lays out (`TEXT left top right bottom text`).
fn probe_page(html: &str) -> String {
    const LISTEN: &str = "<script>window.__probeErrors = [];\
        window.addEventListener('error', function (e) {\
          var t = e.target;\
          window.__probeErrors.push(t && t.tagName ? 'failed to load ' + t.tagName + ' ' + (t.getAttribute('src') || t.getAttribute('href'))\
                                                   : 'script error ' + e.message);\
        }, true);\
        window.addEventListener('unhandledrejection', function (e) { window.__probeErrors.push('rejection ' + e.reason); });\
        ['error', 'warn'].forEach(function (k) { var f = console[k]; console[k] = function () {\
          window.__probeErrors.push('console.' + k + ' ' + Array.prototype.join.call(arguments, ' ')); f.apply(console, arguments); }; });\
        </script>";
    const REPORT: &str = "<script>window.addEventListener('load', function () {\
          var lines = Array.prototype.map.call(document.images, function (i) {\
            return 'IMG ' + i.getAttribute('src') + ' ' + (i.complete ? 'complete' : 'pending') + ' ' + i.naturalWidth + ' ' + i.naturalHeight; });\
          Array.prototype.forEach.call(document.images, function (i) {\
            var r = i.getBoundingClientRect();\
            lines.push('IMGBOX ' + i.getAttribute('src') + ' ' + (r.left + scrollX + i.clientLeft) + ' ' +\
                       (r.top + scrollY + i.clientTop) + ' ' + i.clientWidth + ' ' + i.clientHeight); });\
          var walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT), range = document.createRange();\
          for (var n = walker.nextNode(); n; n = walker.nextNode()) {\
            var text = n.textContent.replace(/\\s+/g, ' ').trim();\
            if (!text || n.parentElement.closest('script, style') || !n.parentElement.checkVisibility()) continue;\
            range.selectNodeContents(n);\
            Array.prototype.forEach.call(range.getClientRects(), function (r) {\
              if (r.width > 0 && r.height > 0) lines.push('TEXT ' + (r.left + scrollX) + ' ' + (r.top + scrollY) + ' ' +\
                                                          (r.right + scrollX) + ' ' + (r.bottom + scrollY) + ' ' + text.slice(0, 80)); }); }\
          window.__probeErrors.forEach(function (e) { lines.push('ERROR ' + e); });\
          lines.push('DONE ' + document.images.length);\
          var pre = document.createElement('pre'); pre.id = 'probe'; pre.textContent = lines.join('\\n');\
          document.body.appendChild(pre); });</script>";
    assert!(html.contains("<head>") && html.contains("</body>"), "the page lacks <head> or </body>");
    html.replacen("<head>", &format!("<head>{LISTEN}"), 1).replacen("</body>", &format!("{REPORT}</body>"), 1)
}

fn probe_lines(dom: &str) -> Vec<String> {
    let start = dom.find("<pre id=\"probe\">").map(|i| i + "<pre id=\"probe\">".len());
    let Some(start) = start else {
        panic!("the probe script did not run: no <pre id=\"probe\"> in the dumped DOM:\n{dom}")
    };
    let end = start + dom[start..].find("</pre>").expect("unterminated probe");
    dom[start..end].lines().map(|l| l.replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")).collect()
}

fn numbers<const N: usize>(words: &[&str], line: &str) -> [f64; N] {
    std::array::from_fn(|i| words[i].parse().unwrap_or_else(|_| panic!("not a number in probe line {line:?}")))
}

/// Every text a reader sees on the page: the page's own (its laid-out boxes), and the text
/// drawn in each chart (as the renderer recorded it) scaled to where the image is shown.
fn page_text(lines: &[String], charts: &[reports::RenderedChart]) -> Vec<TextBox> {
    let mut boxes = Vec::new();
    for line in lines {
        if let Some(rest) = line.strip_prefix("TEXT ") {
            let words: Vec<&str> = rest.splitn(5, ' ').collect();
            let [left, top, right, bottom] = numbers(&words, line);
            boxes.push(TextBox { text: words[4].to_string(), left, top, right, bottom });
        }
    }
    let shown: Vec<&String> = lines.iter().filter(|l| l.starts_with("IMGBOX ")).collect();
    assert_eq!(shown.len(), charts.len(), "{lines:#?}");
    for (line, chart) in shown.into_iter().zip(charts) {
        let words: Vec<&str> = line.split(' ').collect();
        let name = chart.path.file_name().unwrap().to_string_lossy();
        assert_eq!(words[1], name, "images out of order");
        let [x, y, width, height] = numbers(&words[2..], line);
        assert!(width > 0.0 && height > 0.0, "{name} is not shown: {line}");
        let (sx, sy) = (width / chart.width as f64, height / chart.height as f64);
        boxes.extend(chart.text.iter().map(|t| TextBox {
            text: format!("[{name}] {}", t.text),
            left: x + t.left * sx,
            top: y + t.top * sy,
            right: x + t.right * sx,
            bottom: y + t.bottom * sy,
        }));
    }
    boxes
}

/// Every pair of texts on the page that overlap, as "a / b".
fn overlaps(boxes: &[TextBox]) -> Vec<String> {
    reports::overlapping(boxes).into_iter().map(|(i, j)| format!("{:?} / {:?}", boxes[i], boxes[j])).collect()
}

/// Runs the probe copy of `html` (written into `out`) at a reader's window size.
fn probe(dir: &Path, out: &Path, name: &str, html: &str) -> Vec<String> {
    let probe = out.join(format!("{name}.html"));
    std::fs::write(&probe, probe_page(html)).unwrap();
    let run = run_chromium(
        dir,
        name,
        &[
            "--virtual-time-budget=5000".into(),
            "--window-size=1280,2400".into(),
            "--hide-scrollbars".into(),
            "--dump-dom".into(),
            format!("file://{}", probe.display()),
        ],
    );
    assert!(run.status.success(), "chromium --dump-dom failed ({}):\n{}", run.status, run.stderr);
    assert!(console_messages(&run.stderr).is_empty(), "console output: {:#?}", console_messages(&run.stderr));
    probe_lines(&run.stdout)
}

/// Width and height from a PNG's IHDR chunk.
fn png_size(bytes: &[u8]) -> (u32, u32) {
    assert!(bytes.len() > 24 && bytes[..8] == [0x89, b'P', b'N', b'G', b'\r', b'\n', 0x1A, b'\n'], "not a PNG");
    let be = |i: usize| u32::from_be_bytes(bytes[i..i + 4].try_into().unwrap());
    (be(16), be(20))
}

/// Console messages Chromium logged for the page (`--enable-logging=stderr` prints them as
/// `INFO:CONSOLE`); browser-internal noise (D-Bus, GPU) is not from the page and is ignored.
fn console_messages(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.contains(":CONSOLE")).collect()
}

#[test]
fn report_opens_in_chromium_with_every_image_loaded_no_errors_and_a_screenshot() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("results.json");
    // A verification's page: every section a simulation shows, the verified subjects first.
    std::fs::write(&json, serde_json::to_string_pretty(&support::sample::sample_verification()).unwrap()).unwrap();
    let out = dir.path().join("report");
    let paths = reports::render(&json, &out).unwrap();
    let html = std::fs::read_to_string(&paths.index_html).unwrap();

    // 1. Every image loads with a non-zero natural size, and the page raises no error.
    let lines = probe(dir.path(), &out, "probe", &html);
    let errors: Vec<&String> = lines.iter().filter(|l| l.starts_with("ERROR ")).collect();
    assert!(errors.is_empty(), "the page reported errors: {errors:#?}");
    let images: Vec<Vec<&str>> =
        lines.iter().filter(|l| l.starts_with("IMG ")).map(|l| l.split(' ').collect()).collect();
    assert_eq!(lines.last().map(String::as_str), Some(&*format!("DONE {}", paths.charts.len())), "{lines:#?}");
    assert_eq!(images.len(), paths.charts.len(), "{lines:#?}");
    for (img, chart) in images.iter().zip(&paths.charts) {
        let [_, src, state, w, h] = img[..] else { panic!("odd probe line {img:?}") };
        assert_eq!(src, chart.path.file_name().unwrap().to_string_lossy(), "images out of order");
        assert_eq!(state, "complete", "{src} did not finish loading");
        let (w, h): (u32, u32) = (w.parse().unwrap(), h.parse().unwrap());
        assert!(w > 0 && h > 0, "{src} has natural size {w}x{h}: it did not load");
        assert_eq!((w, h), png_size(&std::fs::read(&chart.path).unwrap()), "{src} decoded to another size");
    }

    // 2. No two texts the reader sees overlap: the page's own, and those drawn in its charts.
    let text = page_text(&lines, &paths.charts);
    assert!(text.len() > 1000, "too little text recorded: {}", text.len());
    let found = overlaps(&text);
    assert!(found.is_empty(), "{} pair(s) of overlapping text on the page:\n{}", found.len(), found.join("\n"));

    // 3. The real page (no probe script) as a person sees it: a screenshot, and a silent console.
    let shot = dir.path().join("screenshot.png");
    let run = run_chromium(
        dir.path(),
        "screenshot",
        &[
            format!("--screenshot={}", shot.display()),
            "--window-size=1280,2400".into(),
            "--hide-scrollbars".into(),
            format!("file://{}", paths.index_html.display()),
        ],
    );
    assert!(run.status.success(), "chromium --screenshot failed ({}):\n{}", run.status, run.stderr);
    assert!(console_messages(&run.stderr).is_empty(), "console output: {:#?}", console_messages(&run.stderr));
    let bytes = std::fs::read(&shot).unwrap_or_else(|e| panic!("no screenshot at {}: {e}", shot.display()));
    assert_eq!(png_size(&bytes), (1280, 2400));
    // A blank white 1280x2400 PNG compresses to a few kilobytes; the report is far richer.
    assert!(bytes.len() > 100_000, "the screenshot is suspiciously small ({} bytes): blank page?", bytes.len());
}

#[test]
fn overlapping_text_on_the_page_or_in_a_chart_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report");
    let paths = reports::render_results(&support::sample::sample_results(), &out).unwrap();
    let html = std::fs::read_to_string(&paths.index_html).unwrap();
    // A deliberately broken layout: headings pulled down onto the paragraph under them, and
    // each chart pulled up onto the text above it.
    let broken = html.replacen("</style>", "h2 { margin-bottom: -30px; } figure { margin-top: -60px; }</style>", 1);
    let lines = probe(dir.path(), &out, "broken", &broken);
    let found = overlaps(&page_text(&lines, &paths.charts));
    let heading = "Scenario get-set-race";
    assert!(
        found.iter().any(|o| o.contains(&format!("text: \"{heading}\""))),
        "{heading} overlaps nothing: {found:#?}"
    );
    let chart_title = "[scenario-01-get-set-race.png] Scenario get-set-race: admitted against the oracle over time";
    assert!(found.iter().any(|o| o.contains(chart_title)), "the chart's title overlaps nothing: {found:#?}");
}
