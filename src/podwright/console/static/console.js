// The console's one script of its own: copying the Workload's YAML, where the Clipboard API
// exists (a secure context) or by selecting it for the person to copy.
function copyYaml(button) {
  const yaml = document.getElementById("yaml");
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(yaml.textContent).then(() => { button.textContent = "Copied"; });
    return;
  }
  const range = document.createRange();
  range.selectNodeContents(yaml);
  const selection = window.getSelection();
  selection.removeAllRanges();
  selection.addRange(range);
  button.textContent = "Selected: press Ctrl+C";
}
