//! FFI.md (this crate's list of every foreign function the backend calls) against what the
//! two -sys crates bind: the document lives here, beside the code that calls them, so the
//! check does too (the -sys crates do not read a file of a crate above them).

/// The names in `` `backticks` `` of FFI.md's section headed `## {heading}`.
fn listed_names(heading: &str) -> Vec<&'static str> {
    const FFI_MD: &str = include_str!("../FFI.md");
    let section =
        FFI_MD.split(&format!("## {heading}")).nth(1).unwrap_or_else(|| panic!("FFI.md has no {heading} section"));
    let section = section.split("\n## ").next().unwrap();
    section.split('`').skip(1).step_by(2).collect()
}

fn sorted(mut names: Vec<&str>) -> Vec<&str> {
    names.sort_unstable();
    names
}

#[test]
fn rocblas_functions_in_ffi_md_are_exactly_the_bound_ones() {
    let listed: Vec<&str> = listed_names("librocblas.so")
        .into_iter()
        .filter(|name| name.starts_with("rocblas_") && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        // Enumerators named as arguments.
        .filter(|name| !name.starts_with("rocblas_datatype_") && !name.starts_with("rocblas_gemm_algo_"))
        .collect();
    assert_eq!(sorted(listed), sorted(rocblas_sys::SYMBOLS.to_vec()));
}

#[test]
fn miopen_functions_in_ffi_md_are_exactly_the_bound_ones() {
    // Enumerators FFI.md names as arguments; naming the constants keeps them real ones.
    let arguments =
        [("miopenConvolution", miopen_sys::miopenConvolution), ("miopenTranspose", miopen_sys::miopenTranspose)];
    assert_eq!(arguments.map(|(_, v)| v), [0, 1]);
    let listed: Vec<&str> = listed_names("libMIOpen.so")
        .into_iter()
        .filter(|name| name.starts_with("miopen") && name.chars().all(|c| c.is_ascii_alphanumeric()))
        .filter(|name| !arguments.iter().any(|(a, _)| a == name))
        .collect();
    assert_eq!(sorted(listed), sorted(miopen_sys::SYMBOLS.to_vec()));
}
