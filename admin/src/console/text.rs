//! The few texts of the pages the server renders itself (login, password change); everything else
//! is translated by the page script (`web/i18n.js`).

/// A language the console speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    En,
    Zh,
}

impl Lang {
    /// Reads a stored or requested language code; anything unknown is English.
    pub fn parse(code: &str) -> Lang {
        let c = code.trim().to_ascii_lowercase();
        if c.starts_with("zh") {
            Lang::Zh
        } else {
            Lang::En
        }
    }

    /// The first language of an `Accept-Language` header we speak.
    pub fn from_accept(header: &str) -> Lang {
        for part in header.split(',') {
            let tag = part
                .split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase();
            if tag.starts_with("zh") {
                return Lang::Zh;
            }
            if tag.starts_with("en") {
                return Lang::En;
            }
        }
        Lang::En
    }

    pub fn code(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::Zh => "zh",
        }
    }

    /// The text of `key` in this language.
    pub fn t(self, key: Key) -> &'static str {
        let (en, zh) = match key {
            Key::Product => ("Shardline", "Shardline"),
            Key::LoginTitle => ("Sign in", "登录"),
            Key::Username => ("Username", "用户名"),
            Key::Password => ("Password", "密码"),
            Key::SignIn => ("Sign in", "登录"),
            Key::BadCredentials => ("Wrong username or password.", "用户名或密码错误。"),
            Key::TooMany => (
                "Too many failed logins. Try again in {n} minute(s).",
                "登录失败次数过多，请 {n} 分钟后再试。",
            ),
            Key::FormExpired => (
                "The form expired. Please try again.",
                "表单已过期，请重试。",
            ),
            Key::ChangeTitle => ("Change your password", "修改密码"),
            Key::ChangeNotice => (
                "You must choose a new password before using the console.",
                "使用控制台前必须设置新密码。",
            ),
            Key::CurrentPassword => ("Current password", "当前密码"),
            Key::NewPassword => ("New password", "新密码"),
            Key::ConfirmPassword => ("Repeat the new password", "再次输入新密码"),
            Key::Save => ("Save", "保存"),
            Key::Mismatch => ("The two new passwords differ.", "两次输入的新密码不一致。"),
            Key::TooShort => (
                "The new password must be at least 8 characters.",
                "新密码至少需要 8 个字符。",
            ),
            Key::SamePassword => (
                "The new password must differ from the current one.",
                "新密码不能与当前密码相同。",
            ),
            Key::WrongCurrent => ("The current password is wrong.", "当前密码错误。"),
            Key::Logout => ("Log out", "退出登录"),
            Key::OtherLang => ("中文", "English"),
            Key::Tagline => ("Distributed job scheduler", "分布式任务调度平台"),
        };
        match self {
            Lang::En => en,
            Lang::Zh => zh,
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub enum Key {
    Product,
    LoginTitle,
    Username,
    Password,
    SignIn,
    BadCredentials,
    TooMany,
    FormExpired,
    ChangeTitle,
    ChangeNotice,
    CurrentPassword,
    NewPassword,
    ConfirmPassword,
    Save,
    Mismatch,
    TooShort,
    SamePassword,
    WrongCurrent,
    Logout,
    OtherLang,
    Tagline,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn languages() {
        assert_eq!(Lang::parse("zh-CN"), Lang::Zh);
        assert_eq!(Lang::parse("fr"), Lang::En);
        assert_eq!(Lang::from_accept("fr;q=1, zh-CN;q=0.8, en"), Lang::Zh);
        assert_eq!(Lang::from_accept("en-US,zh;q=0.5"), Lang::En);
        assert_eq!(Lang::Zh.t(Key::SignIn), "登录");
    }
}
