/* C helpers shared by the Cython twins: what a free-threaded build needs of
 * them, at no cost where a GIL exists.
 *
 * jsc_dict_get(d, k): a new reference to d[k], or to None when k is missing
 *   (NULL: an error is set). Never a borrowed reference, which a change to d
 *   by another thread could free before it is used.
 * jsc_dict_pop(d, k): remove d[k] and return it (a new reference), or None
 *   when k was missing; one step, so of two threads popping the same key
 *   exactly one gets it.
 * jsc_incr(p): add one to *p atomically and return the new value.
 * jsc_add(p, v): add v to *p atomically and return the new value.
 */
#ifndef JSC_COMPAT_H
#define JSC_COMPAT_H

#include <Python.h>

static inline PyObject* jsc_dict_get(PyObject* d, PyObject* k) {
    PyObject* v;
#if PY_VERSION_HEX >= 0x030D0000
    if (PyDict_GetItemRef(d, k, &v) < 0) return NULL;
    if (v == NULL) { Py_INCREF(Py_None); return Py_None; }
    return v;
#else
    v = PyDict_GetItemWithError(d, k);  /* borrowed: the GIL keeps it alive */
    if (v == NULL) {
        if (PyErr_Occurred()) return NULL;
        v = Py_None;
    }
    Py_INCREF(v);
    return v;
#endif
}

static inline PyObject* jsc_dict_pop(PyObject* d, PyObject* k) {
    PyObject* v;
#if PY_VERSION_HEX >= 0x030D0000
    if (PyDict_Pop(d, k, &v) < 0) return NULL;
    if (v == NULL) { Py_INCREF(Py_None); return Py_None; }
    return v;
#else
    v = PyDict_GetItemWithError(d, k);
    if (v == NULL) {
        if (PyErr_Occurred()) return NULL;
        Py_INCREF(Py_None);
        return Py_None;
    }
    Py_INCREF(v);
    if (PyDict_DelItem(d, k) < 0) { Py_DECREF(v); return NULL; }
    return v;
#endif
}

static inline long long jsc_incr(long long* p) {
    return __atomic_add_fetch(p, 1, __ATOMIC_RELAXED);
}

static inline long long jsc_add(long long* p, long long v) {
    return __atomic_add_fetch(p, v, __ATOMIC_RELAXED);
}

#endif
