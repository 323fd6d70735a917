//! Texts and pairs read from Python objects. A wrong item is a `TypeError` that names its index,
//! so that a list of ten thousand texts with one `None` in it says which.

use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::errors::{type_error, value_error};

fn type_name(item: &Bound<'_, PyAny>) -> String {
    item.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into())
}

fn text_at(item: &Bound<'_, PyAny>, what: &str) -> PyResult<String> {
    match item.cast::<PyString>() {
        Ok(s) => Ok(s.to_cow()?.into_owned()),
        Err(_) => Err(type_error(format!("{what} is {}, not str", type_name(item)))),
    }
}

/// The texts of a list (or any iterable) of strings, each wrong item named `{name}[i]`.
pub fn texts(items: &Bound<'_, PyAny>, name: &str) -> PyResult<Vec<String>> {
    if items.is_instance_of::<PyString>() {
        return Err(type_error(format!("{name} is one str: pass a list of str")));
    }
    let iter = items
        .try_iter()
        .map_err(|_| type_error(format!("{name} is {}, not a list of str", type_name(items))))?;
    iter.enumerate().map(|(i, item)| text_at(&item?, &format!("{name}[{i}]"))).collect()
}

/// The (first, second) texts of a list of pairs (two-item lists or tuples of str).
pub fn pairs(items: &Bound<'_, PyAny>, name: &str) -> PyResult<Vec<(String, String)>> {
    if items.is_instance_of::<PyString>() {
        return Err(type_error(format!("{name} is one str: pass a list of (str, str) pairs")));
    }
    let iter = items
        .try_iter()
        .map_err(|_| type_error(format!("{name} is {}, not a list of pairs", type_name(items))))?;
    iter.enumerate()
        .map(|(i, item)| {
            let item = item?;
            let what = format!("{name}[{i}]");
            if item.is_instance_of::<PyString>() {
                return Err(type_error(format!("{what} is str, not a (str, str) pair")));
            }
            let parts: Vec<Bound<'_, PyAny>> = match item.try_iter() {
                Ok(parts) => parts.collect::<PyResult<_>>()?,
                Err(_) => {
                    return Err(type_error(format!("{what} is {}, not a (str, str) pair", type_name(&item))))
                }
            };
            if parts.len() != 2 {
                return Err(value_error(format!("{what} has {} items, not 2", parts.len())));
            }
            Ok((text_at(&parts[0], &format!("{what}[0]"))?, text_at(&parts[1], &format!("{what}[1]"))?))
        })
        .collect()
}

/// A positive count option.
pub fn at_least_one(value: usize, name: &str) -> PyResult<usize> {
    if value == 0 {
        return Err(value_error(format!("{name} must be at least 1")));
    }
    Ok(value)
}
