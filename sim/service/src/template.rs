//! The placeholders of a service file (`{port}`, `{redis_url}`, `{key}`...), parsed once when
//! the file is loaded and rendered per instance or per request.

/// A placeholder of a service file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Var {
    /// The instance's own port.
    Port,
    /// `redis://127.0.0.1:P/`, P the instance's fault proxy.
    RedisUrl,
    /// `127.0.0.1`.
    RedisHost,
    /// The instance's fault proxy's port.
    RedisPort,
    /// The instance's number, from 0.
    Instance,
    /// A directory of the instance's own, removed with it.
    Scratch,
    /// The subject file's directory.
    Dir,
    /// The limited identity of one request.
    Key,
    /// The units one request costs (always 1 here).
    Cost,
}

impl Var {
    const ALL: [(Var, &'static str); 9] = [
        (Var::Port, "port"),
        (Var::RedisUrl, "redis_url"),
        (Var::RedisHost, "redis_host"),
        (Var::RedisPort, "redis_port"),
        (Var::Instance, "instance"),
        (Var::Scratch, "scratch"),
        (Var::Dir, "dir"),
        (Var::Key, "key"),
        (Var::Cost, "cost"),
    ];

    fn name(self) -> &'static str {
        Var::ALL.iter().find(|(v, _)| *v == self).map_or("?", |(_, n)| n)
    }
}

/// What starting an instance may use.
pub(crate) const START: &[Var] =
    &[Var::Port, Var::RedisUrl, Var::RedisHost, Var::RedisPort, Var::Instance, Var::Scratch, Var::Dir];
/// What a request may use.
pub(crate) const ASK: &[Var] = &[Var::Port, Var::Instance, Var::Key, Var::Cost];
/// What the one-off set-up may use.
pub(crate) const SETUP: &[Var] = &[Var::Dir];

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Var(Var),
}

/// Text with placeholders, rendered per instance or per request. `{{` and `}}` are braces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    parts: Vec<Part>,
}

/// The values placeholders take.
#[derive(Debug, Clone, Default)]
pub struct Values<'a> {
    pub port: u16,
    pub redis_port: u16,
    pub instance: usize,
    pub scratch: &'a str,
    pub dir: &'a str,
    pub key: &'a str,
}

impl Template {
    /// Parses `text`, allowing the placeholders `allowed`; `{env:NAME}` is read now.
    pub(crate) fn parse(text: &str, allowed: &[Var], env: &dyn Fn(&str) -> Option<String>) -> Result<Template, String> {
        let mut parts = Vec::new();
        let mut text_part = String::new();
        let mut rest = text;
        while let Some(i) = rest.find(['{', '}']) {
            text_part.push_str(&rest[..i]);
            let tail = &rest[i..];
            if tail.starts_with("{{") || tail.starts_with("}}") {
                text_part.push_str(&tail[..1]);
                rest = &tail[2..];
                continue;
            }
            if tail.starts_with('}') {
                return Err(format!("{text:?}: a lone `}}` (write `}}}}` for a brace)"));
            }
            let Some(end) = tail.find('}') else {
                return Err(format!("{text:?}: `{{` is never closed (write `{{{{` for a brace)"));
            };
            let name = &tail[1..end];
            if let Some(var) = name.strip_prefix("env:") {
                let value = env(var).ok_or_else(|| {
                    format!(
                        "{text:?}: the environment variable {var} is not set (the file reads it with {{env:{var}}})"
                    )
                })?;
                text_part.push_str(&value);
            } else {
                let var = Var::ALL.iter().find(|(_, n)| *n == name).map(|(v, _)| *v);
                match var {
                    Some(v) if allowed.contains(&v) => {
                        if !text_part.is_empty() {
                            parts.push(Part::Text(std::mem::take(&mut text_part)));
                        }
                        parts.push(Part::Var(v));
                    }
                    _ => {
                        let names: Vec<String> = allowed.iter().map(|v| format!("{{{}}}", v.name())).collect();
                        return Err(format!(
                            "{text:?}: unknown placeholder `{{{name}}}` here; this field takes {} and {{env:NAME}}",
                            names.join(", ")
                        ));
                    }
                }
            }
            rest = &tail[end + 1..];
        }
        text_part.push_str(rest);
        if !text_part.is_empty() {
            parts.push(Part::Text(text_part));
        }
        Ok(Template { parts })
    }

    /// The text with `v`'s values in place.
    pub fn render(&self, v: &Values<'_>) -> String {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Text(t) => out.push_str(t),
                Part::Var(var) => match var {
                    Var::Port => out.push_str(&v.port.to_string()),
                    Var::RedisUrl => out.push_str(&format!("redis://127.0.0.1:{}/", v.redis_port)),
                    Var::RedisHost => out.push_str("127.0.0.1"),
                    Var::RedisPort => out.push_str(&v.redis_port.to_string()),
                    Var::Instance => out.push_str(&v.instance.to_string()),
                    Var::Scratch => out.push_str(v.scratch),
                    Var::Dir => out.push_str(v.dir),
                    Var::Key => out.push_str(v.key),
                    Var::Cost => out.push('1'),
                },
            }
        }
        out
    }

    /// Whether it uses `var`.
    pub fn uses(&self, var: Var) -> bool {
        self.parts.contains(&Part::Var(var))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn braces_are_escaped_by_doubling() {
        let t = Template::parse("{{\"k\":\"{key}\"}}", ASK, &|_| None).expect("valid");
        assert_eq!(t.render(&Values { key: "a", ..Values::default() }), "{\"k\":\"a\"}");
    }
}
