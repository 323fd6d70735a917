//! The exceptions: `RoformerError`, the base of every error the crate raises, and one subclass of
//! it for each Python built-in a caller already catches: `OSError` for a model folder, file or Hub
//! request at fault, `ValueError` for a bad option or input, `TypeError` for an input of the wrong
//! type. They are made once, when the module loads, as `type(name, (RoformerError, builtin), {})`:
//! PyO3's exception macros take a single base.

use pyo3::exceptions::{PyException, PyOSError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

struct Classes {
    os: Py<PyType>,
    value: Py<PyType>,
    type_: Py<PyType>,
    base: Py<PyType>,
}

static CLASSES: PyOnceLock<Classes> = PyOnceLock::new();

fn subclass<'py>(
    py: Python<'py>,
    name: &str,
    bases: &[Bound<'py, PyType>],
    doc: &str,
) -> PyResult<Bound<'py, PyType>> {
    let namespace = PyDict::new(py);
    namespace.set_item("__module__", "roformer_rs")?;
    namespace.set_item("__doc__", doc)?;
    let made = py.get_type::<PyType>().call1((name, PyTuple::new(py, bases)?, namespace))?;
    Ok(made.cast_into::<PyType>()?)
}

/// Makes the classes and adds them to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let base =
        subclass(py, "RoformerError", &[py.get_type::<PyException>()], "Every error roformer_rs raises.")?;
    let os = subclass(
        py,
        "RoformerOSError",
        &[base.clone(), py.get_type::<PyOSError>()],
        "A model folder, file or Hub request at fault: a missing file, a malformed checkpoint or config.",
    )?;
    let value = subclass(
        py,
        "RoformerValueError",
        &[base.clone(), py.get_type::<PyValueError>()],
        "A bad option or input: an unknown precision or prompt name, an empty text, a batch size of 0.",
    )?;
    let type_ = subclass(
        py,
        "RoformerTypeError",
        &[base.clone(), py.get_type::<PyTypeError>()],
        "An input of the wrong type; the message names its index.",
    )?;
    for class in [&base, &os, &value, &type_] {
        m.add(class.name()?, class)?;
    }
    let classes =
        Classes { os: os.unbind(), value: value.unbind(), type_: type_.unbind(), base: base.unbind() };
    CLASSES
        .set(py, classes)
        .map_err(|_| PyException::new_err("roformer_rs._native was initialised twice"))?;
    Ok(())
}

fn raise(py: Python<'_>, pick: impl Fn(&Classes) -> &Py<PyType>, message: String) -> PyErr {
    match CLASSES.get(py) {
        Some(classes) => PyErr::from_type(pick(classes).bind(py).clone(), message),
        None => PyException::new_err(message),
    }
}

/// A `ValueError` (and `RoformerError`).
pub fn value_error(message: impl Into<String>) -> PyErr {
    Python::attach(|py| raise(py, |c| &c.value, message.into()))
}

/// A `TypeError` (and `RoformerError`).
pub fn type_error(message: impl Into<String>) -> PyErr {
    Python::attach(|py| raise(py, |c| &c.type_, message.into()))
}

/// The crate's error as the exception that names it, its message followed by each error under it.
pub fn to_py(err: roformer::Error) -> PyErr {
    use roformer::Error as E;
    let mut message = err.to_string();
    let mut source = std::error::Error::source(&err);
    while let Some(inner) = source {
        let text = inner.to_string();
        if !message.contains(&text) {
            message = format!("{message}: {text}");
        }
        source = inner.source();
    }
    let pick: fn(&Classes) -> &Py<PyType> = match &err {
        E::Io { .. } | E::MissingTensor { .. } | E::ShapeMismatch { .. } | E::Checkpoint { .. } => |c| &c.os,
        E::Vocab { .. } | E::Hub { .. } | E::Config { path: Some(_), .. } => |c| &c.os,
        E::Config { path: None, .. } | E::Input(_) | E::InvalidOption { .. } => |c| &c.value,
        E::UnknownPrompt { .. } | E::Unsupported(_) | E::Tokenizer { .. } => |c| &c.value,
        _ => |c| &c.base,
    };
    Python::attach(|py| raise(py, pick, message))
}

/// `?` for the crate's results in PyO3 functions.
pub trait OrRaise<T> {
    /// The value, or the crate's error as its exception.
    fn or_raise(self) -> PyResult<T>;
}

impl<T> OrRaise<T> for roformer::Result<T> {
    fn or_raise(self) -> PyResult<T> {
        self.map_err(to_py)
    }
}
